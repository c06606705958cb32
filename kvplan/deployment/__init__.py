"""The Deployment and the front doors that build it: flags, pasted launch commands, vLLM --config files and
plain mappings."""

from kvplan.deployment.declaration import Deployment, knobs

__all__ = ["Deployment", "knobs"]
