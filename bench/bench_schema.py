"""The schema of the benchmarks' generated rows, for the pyiceberg baselines: the Iceberg schema
their table is created with, and the Arrow schema pyarrow reads the NDJSON with."""
import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import BooleanType, DoubleType, LongType, NestedField, StringType, TimestamptzType

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "ts", TimestamptzType(), required=False),
    NestedField(3, "user", StringType(), required=False),
    NestedField(4, "level", StringType(), required=False),
    NestedField(5, "amount", DoubleType(), required=False),
    NestedField(6, "ok", BooleanType(), required=False),
    NestedField(7, "message", StringType(), required=False),
)
ARROW_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("user", pa.string()),
        pa.field("level", pa.string()),
        pa.field("amount", pa.float64()),
        pa.field("ok", pa.bool_()),
        pa.field("message", pa.string()),
    ]
)
