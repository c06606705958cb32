"""The textbook engine has no command line of its own: kvplan's shared knobs, by their names."""

from kvplan.deployment.dialect import Dialect

DIALECT = Dialect(name="simple", label="The engine")
