"""A multi-node step on one machine: `num_nodes: N` runs N processes of the step's command, as SkyPilot runs one
per node, each with SkyPilot 0.14.1's node variables (sky/backends/task_codegen.py, sky/skylet/constants.py):

- `SKYPILOT_NODE_RANK`: 0 .. N-1 (SkyPilot ranks the head node 0);
- `SKYPILOT_NUM_NODES`: N;
- `SKYPILOT_NODE_IPS`: the nodes' addresses, one a line, in rank order (here every node is 127.0.0.1);
- `SKYPILOT_NUM_GPUS_PER_NODE`: the accelerator count of the step's profile (per node, as SkyPilot counts it).

Gang-started: the N processes start together, once the job's wrapper holds the job's GPUs; each node gets its own
`--gpus-per-node` of the devices in `CUDA_VISIBLE_DEVICES` (round robin when the job holds fewer than N times
that, `local_jobs.job_executor`). Gang-ended: the step fails as soon as one node fails (the others are stopped, as
SkyPilot ends a job whose node failed), succeeds when every node succeeded, and a cancel (SIGTERM/SIGINT) stops
every node. The job's containment still ends the whole tree on cancel, as for any job.

Run as `python -I gang.py --nodes N --gpus-per-node G -- COMMAND...` (standard library only, like the wrapper).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

NODE_RANK = "SKYPILOT_NODE_RANK"
NUM_NODES = "SKYPILOT_NUM_NODES"
NODE_IPS = "SKYPILOT_NODE_IPS"
NUM_GPUS_PER_NODE = "SKYPILOT_NUM_GPUS_PER_NODE"
NODE_VARIABLES = (NODE_RANK, NUM_NODES, NODE_IPS, NUM_GPUS_PER_NODE)
LOCAL_IP = "127.0.0.1"
STOP_GRACE_SECONDS = 5.0


def node_environment(base: dict[str, str], rank: int, nodes: int, gpus_per_node: int) -> dict[str, str]:
    """The environment of node `rank`: `base` with SkyPilot's node variables and this node's devices."""
    env = dict(base)
    env.update({NODE_RANK: str(rank), NUM_NODES: str(nodes), NODE_IPS: "\n".join([LOCAL_IP] * nodes),
                NUM_GPUS_PER_NODE: str(gpus_per_node)})
    held = [d for d in base.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if "CUDA_VISIBLE_DEVICES" in base:  # the runtime gave the job devices: each node gets its own share
        mine = [held[(rank * gpus_per_node + k) % len(held)] for k in range(gpus_per_node)] if held else []
        env["CUDA_VISIBLE_DEVICES"] = ",".join(dict.fromkeys(mine))
    return env


def _stop(children: list[subprocess.Popen[bytes]], grace: float) -> None:
    for child in children:
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + grace
    for child in children:
        try:
            child.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def run(nodes: int, gpus_per_node: int, command: list[str], grace: float = STOP_GRACE_SECONDS) -> int:
    children: list[subprocess.Popen[bytes]] = []
    stopping: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    base = dict(os.environ)
    try:
        for rank in range(nodes):
            children.append(subprocess.Popen(command, env=node_environment(base, rank, nodes, gpus_per_node)))
    except OSError as exc:
        print(f"npa-workflow: node {len(children)} of {nodes} could not start: {exc}", file=sys.stderr, flush=True)
        _stop(children, grace)
        return 127
    while True:
        if stopping:
            _stop(children, grace)
            return 128 + stopping[0]
        codes = [child.poll() for child in children]
        failed = [(rank, code) for rank, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            rank, code = failed[0]
            print(f"npa-workflow: node {rank} of {nodes} exited with {code}: stopping the other nodes",
                  file=sys.stderr, flush=True)
            _stop(children, grace)
            return code if code > 0 else 128 - code  # a node killed by signal S: 128 + S, as a shell says
        if all(code == 0 for code in codes):
            return 0
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gang.py")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--gpus-per-node", type=int, default=0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.nodes < 1 or not command:
        parser.error("give --nodes N (N >= 1) and a command after --")
    return run(args.nodes, args.gpus_per_node, command)


if __name__ == "__main__":
    sys.exit(main())
