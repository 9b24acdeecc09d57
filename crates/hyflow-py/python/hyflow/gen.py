"""Workload generators (``hyflow gen ...``): each writes its files and returns the line the
CLI prints. Keywords are the CLI's long options, ``-`` as ``_``."""

from __future__ import annotations

from . import _hyflow, _options

__all__ = ["conversations", "dynamic", "gateway", "pipeline", "traffic", "updates"]


def _generator(kind: str, intro: str):
    command = f"gen_{kind}"

    def run(**options) -> str:
        return _hyflow.generate(kind, _options.argv(command, options))

    run.__name__ = kind
    run.__qualname__ = kind
    run.__doc__ = _options.document(command, intro)
    return run


traffic = _generator("traffic", "A pcap whose flows exercise a flow file's rules (``hyflow gen traffic``).")
updates = _generator("updates", "A rule-update stream for a flow file (``hyflow gen updates``).")
dynamic = _generator("dynamic", "Traffic whose large flows change, with bursts (``hyflow gen dynamic``).")
pipeline = _generator("pipeline", "A Pipebench-style workload for a Gigaflow reference pipeline (``hyflow gen pipeline``).")
gateway = _generator("gateway", "Cloud-gateway traffic as a pcap (``hyflow gen gateway``).")
conversations = _generator(
    "conversations",
    "Conversations for stateful pipelines as pcapng, a port per interface (``hyflow gen conversations``).",
)
