"""SGLang's releases as kvplan knows them. The budget (budget.py) is read from the 0.5.23 release, its defaults
checked against 0.5.9's; the flag catalogue (flags.py) records each removal by the first release without it,
over the wheels from 0.4.6 on, which is where this table starts."""

from kvplan.engines.releases import Releases

COVERED = (
    "0.4.6", "0.4.7", "0.4.8", "0.4.9", "0.4.10", "0.5.1", "0.5.2", "0.5.3", "0.5.4", "0.5.5", "0.5.6", "0.5.7",
    "0.5.8", "0.5.9", "0.5.10", "0.5.11", "0.5.12", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.17", "0.5.18",
    "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23",
)

RELEASES = Releases("SGLang", COVERED)
