"""python -m kvplan"""

from kvplan.cli.app import run

run()
