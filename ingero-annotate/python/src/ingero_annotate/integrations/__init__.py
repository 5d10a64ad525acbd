"""Drop-in framework adapters for ``ingero-annotate``.

Each adapter lives in its own module and imports its framework lazily, so
importing this package costs nothing and needs no framework installed:

- ``ingero_annotate.integrations.lightning``: ``IngeroCallback``
- ``ingero_annotate.integrations.hf``: ``IngeroTrainerCallback``
- ``ingero_annotate.integrations.accelerate``: ``annotate_accelerator``
- ``ingero_annotate.integrations.deepspeed``: ``annotate_engine``
- ``ingero_annotate.integrations.ray``: ``annotate_task``, ``task_annotation``
- ``ingero_annotate.integrations.vllm``: ``RequestEmitter``

The label vocabulary they share is in ``_common`` and docs/integrations.md.
"""

from ._common import (
    KEY_BATCH_IDX,
    KEY_STAGE,
    PHASE_PREDICT,
    PHASE_TEST,
    PHASE_TRAIN,
    PHASE_VAL,
    PHASES,
    STAGE_BACKWARD,
    STAGE_FORWARD,
    STAGE_OPTIMIZER_STEP,
    STAGES,
    Emitter,
    sanitize_labels,
)

__all__ = [
    "KEY_BATCH_IDX",
    "KEY_STAGE",
    "PHASE_PREDICT",
    "PHASE_TEST",
    "PHASE_TRAIN",
    "PHASE_VAL",
    "PHASES",
    "STAGE_BACKWARD",
    "STAGE_FORWARD",
    "STAGE_OPTIMIZER_STEP",
    "STAGES",
    "Emitter",
    "sanitize_labels",
]
