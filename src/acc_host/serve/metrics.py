"""The servers' Prometheus metrics, on the registry that KServe's
``/metrics`` endpoint exposes (prometheus_client's default one).

* ``acc_host_serve_requests_total`` (counter; model, outcome: ok,
  bad_request, error);
* ``acc_host_serve_request_seconds`` (histogram; model);
* ``acc_host_serve_batch_size`` (histogram; model): the batch a request ran
  in (dynamic batching merges requests);
* ``acc_host_serve_device_stat`` (gauge; accelerator, device, stat): the
  plugin's numeric ``configure(query="stats")`` answers;
* ``acc_host_serve_device_utilisation`` (gauge; accelerator, device): busy
  time over wall time between two updates, from the ``sim_time_ns`` stat
  where the plugin reports it (mlu_sim).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from prometheus_client import Counter, Gauge, Histogram

__all__ = ["REQUESTS", "LATENCY", "BATCH_SIZE", "DEVICE_STAT", "DEVICE_UTILISATION",
           "record_request", "record_device_stats", "BUSY_STAT"]

REQUESTS = Counter("acc_host_serve_requests", "Inference requests answered",
                   ["model", "outcome"])
LATENCY = Histogram("acc_host_serve_request_seconds", "Inference request latency (seconds)",
                    ["model"], buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                        0.5, 1.0, 2.5, 5.0, 10.0))
BATCH_SIZE = Histogram("acc_host_serve_batch_size", "Batch size a request ran in",
                       ["model"], buckets=(1, 2, 4, 8, 16, 32, 64, 128))
DEVICE_STAT = Gauge("acc_host_serve_device_stat", "A plugin's numeric device statistic",
                    ["accelerator", "device", "stat"])
DEVICE_UTILISATION = Gauge("acc_host_serve_device_utilisation",
                           "Device busy time over wall time since the previous update",
                           ["accelerator", "device"])

#: The stat whose growth is the device's busy time, in nanoseconds.
BUSY_STAT = "sim_time_ns"

_last_busy: dict[tuple[str, str], tuple[float, float]] = {}
_lock = threading.Lock()


def record_request(model: str, outcome: str, seconds: float, batch: int | None) -> None:
    REQUESTS.labels(model=model, outcome=outcome).inc()
    LATENCY.labels(model=model).observe(seconds)
    if batch is not None:
        BATCH_SIZE.labels(model=model).observe(batch)


def record_device_stats(accelerator: str, device: int, stats: Mapping[str, float],
                        now: float | None = None) -> None:
    """Sets the device's stat gauges and, from the busy-time stat, its
    utilisation since the previous call."""
    now = time.monotonic() if now is None else now
    labels = (accelerator, str(device))
    for stat, value in stats.items():
        DEVICE_STAT.labels(accelerator=accelerator, device=labels[1], stat=stat).set(value)
    if BUSY_STAT not in stats:
        return
    busy = stats[BUSY_STAT] / 1e9
    with _lock:
        previous = _last_busy.get(labels)
        _last_busy[labels] = (now, busy)
    if previous is not None and now > previous[0] and busy >= previous[1]:
        share = (busy - previous[1]) / (now - previous[0])
        DEVICE_UTILISATION.labels(accelerator=accelerator, device=labels[1]).set(share)
