"""No third-party advertisements in what a training run prints.

Why a log filter: Lightning 2.6 logs "💡 Tip: ... try installing litlogger/litmodels ..." through the standard
`logging` module (rank_zero_info) every time a Trainer is built, an advertisement for a hosted service. A
logging.Filter on the loggers that emit it drops exactly those records; Lightning's other messages stay. (The
progress bar and lines: tinygpt/train/callbacks/progress.py.)
"""

from __future__ import annotations

import logging
import warnings

TIP_PREFIX = "💡 Tip"
# the loggers rank_zero_info may write through: lightning_utilities' rank_zero module logs via whichever of these
# was imported last, and the standalone pytorch_lightning / lightning_fabric packages (imported, for instance, in
# a submitit job) set their own
TIP_LOGGERS = (
    "lightning.pytorch.utilities.rank_zero",
    "lightning.fabric.utilities.rank_zero",
    "pytorch_lightning.utilities.rank_zero",
    "lightning_fabric.utilities.rank_zero",
)


class NoThirdPartyTips(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(TIP_PREFIX)


def silence_third_party_tips() -> None:
    """Drop Lightning's advertisement tips from its log output, and the FutureWarning torch raises on each run for
    Lightning's own use of ``LeafSpec`` (lightning/pytorch/utilities/_pytree.py, Lightning 2.6 with torch 2.13):
    nothing a user can act on, filtered by its message where Lightning raises it (idempotent)."""
    from lightning_utilities.core import rank_zero

    warnings.filterwarnings(
        "ignore",
        message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
        category=FutureWarning,
        module=r"lightning\.pytorch\.utilities\._pytree",
    )

    current = getattr(rank_zero, "log", None)  # the logger rank_zero_info uses now
    names = TIP_LOGGERS + ((current.name,) if isinstance(current, logging.Logger) else ())
    for name in dict.fromkeys(names):
        logger = logging.getLogger(name)
        if not any(isinstance(f, NoThirdPartyTips) for f in logger.filters):
            logger.addFilter(NoThirdPartyTips())
