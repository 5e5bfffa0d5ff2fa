"""TEMPORARY old import path of the pipeline's offset stores (now offset_stores.py), kept only while
tidelake/cli/pipeline.py and benchmarks/paper_experiments.py still import from here; delete it when they
import ``BrokerOffsets``, ``ClientOffsetFile`` and ``offsets_from_app_state`` from offset_stores."""
from tidelake.spark.offset_stores import BrokerOffsets, ClientOffsetFile as GtoffsetFile, offsets_from_app_state

__all__ = ["BrokerOffsets", "GtoffsetFile", "offsets_from_app_state"]
