"""ExtractNewRecordState's add.headers against Debezium 3.6.3's headers (tests/data/transforms/with_headers/
unwrap_headers, recorded with scripts/debezium_reference_headers.py and compared by
tests/transforms/golden_transforms.py, which come with the other SMTs: skipped without them).

`source.snapshot` of a streamed event is null in Debezium's struct (JsonConverter writes its default,
"false"), and so is a header copied from it: typed blocks hold that null too."""

from __future__ import annotations

import pytest

from tests.golden_support import assert_events_equal


def test_add_headers_equal_debezium(pg_server):
    golden = pytest.importorskip("tests.transforms.golden_transforms")
    directory = golden.ROOT / "unwrap_headers"
    assert_events_equal(golden.expected_events(directory), golden.run_scenario(pg_server, directory),
                        keep_headers=True)
