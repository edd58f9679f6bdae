"""Run as a script (``python tests/integration/daemon_tick.py STATE``): one tick of the daemon's two
sensors on the evaluation the environment names, with the code on ``PYTHONPATH``. The candidate-store
sensor's new partitions and observations are recorded, then the automation sensor's requests are
printed as JSON (``{asset: [partitions]}``); both cursors are kept in the file ``STATE``."""

import json
import sys
from pathlib import Path


def main(state: Path) -> None:
    from dagster_shared.serdes import deserialize_value, serialize_value

    from argus_dagster.client.instance import local_instance
    from argus_dagster.resources import resources_for
    from tests.integration.helpers import Daemon

    instance = local_instance()
    daemon = Daemon(instance, resources_for())
    if state.is_file():
        saved = json.loads(state.read_text())
        daemon.sensor_cursor = saved["sensor"]
        daemon.automation_cursor = deserialize_value(saved["automation"]) if saved["automation"] else None
    asked = daemon.tick()
    state.write_text(json.dumps({"sensor": daemon.sensor_cursor,
                                 "automation": serialize_value(daemon.automation_cursor)}))
    print(json.dumps(asked))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
