"""Plexus as a torch.distributed backend.

    import plexus_torch                      # registers the backend "plexus"
    torch.distributed.init_process_group("plexus", ...)

CPU tensors, every operation of the process-group API (see integrations/torch/README.md).
"""
import datetime

import torch
import torch.distributed as dist

from ._C import ProcessGroupPlexus


def _create(store, rank, size, timeout):
    if isinstance(timeout, (int, float)):
        timeout = datetime.timedelta(seconds=timeout)
    return ProcessGroupPlexus(store, rank, size, timeout)


if "PLEXUS" not in dist.Backend._plugins:
    dist.Backend.register_backend("plexus", _create)

__all__ = ["ProcessGroupPlexus"]
