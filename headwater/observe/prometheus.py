"""The optional Prometheus endpoint of a running connector (`headwater.metrics.port`, off by default).

Each numeric or boolean attribute of `ConnectorMetrics` is a gauge named as Debezium's metrics are
through the Prometheus JMX exporter, `debezium_metrics_<Attribute>`, with the labels `context`
(`snapshot` or `streaming`), `plugin` (the connector's short name) and `name` (`topic.prefix`);
`RowsScanned` has one sample per table (label `table`). Values are read at each scrape.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from headwater.observe.metrics import ConnectorMetrics

PREFIX = "debezium_metrics_"
LABELS = ["context", "plugin", "name"]


class MetricsCollector(Collector):
    """Collects a `ConnectorMetrics` at each scrape."""

    def __init__(self, metrics: ConnectorMetrics):
        self.metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily]:
        m = self.metrics
        families: dict[str, GaugeMetricFamily] = {}
        for context, values in m.values().items():
            labels = [context, m.connector, m.server]
            for attribute, value in values.items():
                family = _family(families, attribute, value)
                if family is None:
                    continue
                if attribute == "RowsScanned":
                    for table, rows in value.items():
                        family.add_metric([*labels, table], rows)
                else:
                    family.add_metric(labels, float(value))
        yield from families.values()


def _family(families: dict[str, GaugeMetricFamily], attribute: str, value: Any) -> GaugeMetricFamily | None:
    """The gauge family of `attribute`, made on first use; None for an attribute that is not a number."""
    if attribute != "RowsScanned" and not isinstance(value, (bool, int, float)):
        return None
    if attribute not in families:
        labels = [*LABELS, "table"] if attribute == "RowsScanned" else LABELS
        families[attribute] = GaugeMetricFamily(PREFIX + attribute, f"Debezium's {attribute}", labels=labels)
    return families[attribute]


class Endpoint:
    """An HTTP server answering Prometheus scrapes of `metrics` on `host`:`port`."""

    def __init__(self, metrics: ConnectorMetrics, port: int, host: str):
        registry = CollectorRegistry()
        registry.register(MetricsCollector(metrics))
        self.server, self.thread = start_http_server(port, host, registry=registry)
        self.port = self.server.server_port

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
