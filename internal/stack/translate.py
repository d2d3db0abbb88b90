"""Prints the CloudFormation that SAM's own translator makes of a template.

Offline: local CodeUri paths become placeholder S3 locations (as `sam
validate` does), and no managed policy is looked up (Outflow's functions use
their own roles).
"""

import json
import os
import sys

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

from samtranslator.translator.transform import transform  # noqa: E402
from samtranslator.yaml_helper import yaml_parse  # noqa: E402


class NoManagedPolicies:
    def load(self):
        return {}


with open(sys.argv[1], encoding="utf-8") as f:
    template = yaml_parse(f.read())
for resource in template.get("Resources", {}).values():
    props = resource.get("Properties") or {}
    if resource.get("Type") == "AWS::Serverless::Function" and isinstance(props.get("CodeUri"), str):
        props["CodeUri"] = "s3://placeholder/" + props["CodeUri"]
json.dump(transform(template, {}, NoManagedPolicies()), sys.stdout, default=str)
