"""Admin policy for the contract-test SkyPilot API server only (never for a real server).

A task whose ``envs`` set ``NPA_TEST_HOLD_SECONDS`` is held that long when the jobs controller
validates it before launching its cluster, so the job stays STARTING long enough to be
cancelled deterministically. Without a cloud every other job reaches FAILED_PRECHECKS within
seconds, which is too fast to race a cancel against.

The server imports this module (``admin_policy: npa_test_hold_policy.HoldPolicy`` in the
server's config, this folder on its ``PYTHONPATH``). ``/validate`` runs the policy in a worker
thread, so the sleep blocks neither the event loop nor any other request. Creating the file
``~/.npa-test-release-holds`` (the server's HOME) ends every hold at once, so that stopping
the server does not wait for one.
"""

import os
import time

import sky

HOLD_ENV = "NPA_TEST_HOLD_SECONDS"
MAX_HOLD_SECONDS = 300.0
RELEASE_FILE = "~/.npa-test-release-holds"


class HoldPolicy(sky.AdminPolicy):
    @classmethod
    def validate_and_mutate(cls, user_request):
        request_name = getattr(user_request.request_name, "value", user_request.request_name)
        hold = (user_request.task.envs or {}).get(HOLD_ENV)
        if hold and request_name == "validate":
            release = os.path.expanduser(RELEASE_FILE)
            until = time.monotonic() + min(float(hold), MAX_HOLD_SECONDS)
            while time.monotonic() < until and not os.path.exists(release):
                time.sleep(0.5)
        return sky.MutatedUserRequest(user_request.task, user_request.skypilot_config)
