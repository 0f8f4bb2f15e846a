"""What the sandbox stack and the Fargate driver agree on: the container, its port, the
workspace volume, the session tag, the image's user and the subnets the control plane runs in.

Read from ``openagents.sandbox.fargate_storage`` (``FargateConfig``) and
``openagents.sandbox.fargate_efs`` so the two cannot drift.
"""

from __future__ import annotations

import dataclasses

from aws_cdk import aws_ec2 as ec2
from openagents.sandbox import fargate_efs, fargate_storage

_DEFAULTS = {f.name: f.default for f in dataclasses.fields(fargate_storage.FargateConfig)}
CONTAINER_NAME = str(_DEFAULTS["container_name"])  # "sandboxd"
SANDBOX_PORT = int(str(_DEFAULTS["sandbox_port"]))  # 8080
VOLUME_NAME = str(_DEFAULTS["volume_name"])  # "workspace"
WORKSPACE = "/workspace"  # sandbox/Dockerfile
SANDBOX_UID = fargate_efs.SANDBOX_UID  # the image's non-root user
TAG_SESSION = fargate_storage.TAG_SESSION
NFS_PORT = 2049
ECS_TASKS = "ecs-tasks.amazonaws.com"
ECS = "ecs.amazonaws.com"
# the private subnets with a NAT route: the control-plane Lambdas (and, egress open, the sandboxes)
CONTROL_PLANE_SUBNETS = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
