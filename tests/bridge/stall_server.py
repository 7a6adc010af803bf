"""A bridge server whose policy stalls inside `act` once a marker file exists (for the kill -9 test).

    python tests/bridge/stall_server.py BIND STATE_DIR STALL_FILE ENTERED_FILE

While STALL_FILE exists, `act` touches ENTERED_FILE and then sleeps, so the test knows the server is in
the middle of a request when it kills it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bridge.logs import setup_json_logging  # noqa: E402
from bridge.server import BridgeServer, ServerConfig  # noqa: E402
from npc_brains.baselines import ScriptedPolicy  # noqa: E402


class StallingPolicy(ScriptedPolicy):
    def __init__(self, stall: Path, entered: Path):
        super().__init__(slots=4, seed=0)
        self.stall, self.entered = stall, entered

    def act(self, obs, mask, **kwargs):
        if self.stall.exists():
            self.entered.touch()
            time.sleep(60)  # killed long before this ends
        return super().act(obs, mask, **kwargs)


def main() -> None:
    bind, state_dir, stall, entered = sys.argv[1:5]
    setup_json_logging("info")
    server = BridgeServer(ServerConfig(bind=bind, policy="scripted", state_dir=Path(state_dir)),
                          StallingPolicy(Path(stall), Path(entered)))
    server.start()
    server.serve_forever()


if __name__ == "__main__":
    main()
