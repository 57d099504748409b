"""The npa-workflow CDK app (`cdk.json` → `infra/app.py`)."""
