"""Sandbox: the network the sandboxes and the control plane share, who may reach sandboxd, the
Fargate task definition the driver expects, its roles, the token key, and the EFS variant."""

from __future__ import annotations

import json
from typing import Any

from openagents.sandbox.fargate import FargateConfig

from infra.constructs.sandbox import CONTAINER_NAME, INIT_CONTAINER, SANDBOX_PORT, VOLUME_NAME
from tests.infra.conftest import ROOT, Synth

VOLUMES_POLICY = "service-role/AmazonECSInfrastructureRolePolicyForVolumes"


def _props(synth: Synth, construct: Any) -> dict[str, Any]:
    props: dict[str, Any] = synth.data["Resources"][synth.logical_id(construct)]["Properties"]
    return props


def _containers(synth: Synth) -> dict[str, dict[str, Any]]:
    props = _props(synth, synth.stack.sandbox.task_definition)
    return {c["Name"]: c for c in props["ContainerDefinitions"]}


def _policies_of(synth: Synth, role: Any) -> list[dict[str, Any]]:
    ref = {"Ref": synth.logical_id(role)}
    return [
        p["Properties"]["PolicyDocument"]
        for p in synth.resources("AWS::IAM::Policy").values()
        if ref in p["Properties"]["Roles"]
    ]


def test_driver_contract_matches_the_driver_defaults() -> None:
    """The task definition is built for the driver's defaults: container, port, volume."""
    defaults = FargateConfig.__dataclass_fields__
    assert defaults["container_name"].default == CONTAINER_NAME == "sandboxd"
    assert defaults["sandbox_port"].default == SANDBOX_PORT == 8080
    assert defaults["volume_name"].default == VOLUME_NAME == "workspace"


def test_task_definition_is_arm64_fargate_with_a_volume_configured_at_launch(dev: Synth) -> None:
    props = _props(dev, dev.stack.sandbox.task_definition)
    assert props["RequiresCompatibilities"] == ["FARGATE"]
    assert props["NetworkMode"] == "awsvpc"
    assert props["RuntimePlatform"] == {
        "CpuArchitecture": "ARM64",
        "OperatingSystemFamily": "LINUX",
    }
    assert (props["Cpu"], props["Memory"]) == ("2048", "4096")
    assert props["Family"] == "openagents-dev-sandbox"
    assert props["Volumes"] == [{"Name": "workspace", "ConfiguredAtLaunch": True}]


def test_sandboxd_waits_for_the_workspace_chown(dev: Synth) -> None:
    containers = _containers(dev)
    assert set(containers) == {CONTAINER_NAME, INIT_CONTAINER}
    mount = [{"ContainerPath": "/workspace", "ReadOnly": False, "SourceVolume": "workspace"}]
    init = containers[INIT_CONTAINER]
    # a managed EBS volume is mounted root-owned: root chowns it to the image's user, and exits
    assert init["Essential"] is False
    assert init["User"] == "0"
    assert init["EntryPoint"] == ["chown"]
    assert init["Command"] == ["1000:1000", "/workspace"]
    assert init["ReadonlyRootFilesystem"] is True
    assert init["MountPoints"] == mount
    sandboxd = containers[CONTAINER_NAME]
    assert sandboxd["Essential"] is True
    assert sandboxd["DependsOn"] == [{"Condition": "SUCCESS", "ContainerName": INIT_CONTAINER}]
    assert sandboxd["PortMappings"] == [{"ContainerPort": 8080, "Protocol": "tcp"}]
    assert sandboxd["MountPoints"] == mount
    assert sandboxd["LinuxParameters"]["Capabilities"] == {"Drop": ["ALL"]}
    assert "User" not in sandboxd  # the image's USER sandbox (1000)
    # the token is a per-task override (RunTask): nothing secret in the task definition
    assert "Environment" not in sandboxd
    assert "Secrets" not in sandboxd
    assert init["Image"] == sandboxd["Image"]
    logs = {"Ref": dev.logical_id(dev.stack.sandbox.log_group)}
    for container in containers.values():
        options = container["LogConfiguration"]["Options"]
        assert container["LogConfiguration"]["LogDriver"] == "awslogs"
        assert options["awslogs-group"] == logs
        assert options["mode"] == "non-blocking"


def test_the_image_is_the_sandbox_folder_built_for_arm64(dev: Synth) -> None:
    manifest = json.loads(dev.path.with_name(f"{dev.stack.artifact_id}.assets.json").read_text())
    (image,) = manifest["dockerImages"].values()
    assert image["source"]["directory"] == str(ROOT / "sandbox")
    assert image["source"]["platform"] == "linux/arm64"


def _task_roles(synth: Synth) -> set[str]:
    """Every role in the stack that ECS tasks may assume (logical ids)."""
    return {
        logical
        for logical, role in synth.resources("AWS::IAM::Role").items()
        for statement in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        if statement["Principal"] == {"Service": "ecs-tasks.amazonaws.com"}
    }


def test_an_ebs_sandbox_has_no_task_role(
    dev: Synth, prod: Synth, closed: Synth, ext: Synth
) -> None:
    """Agent code runs in the task: with no task role, ECS gives it no credentials at all (no
    ``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI``, nothing at 169.254.170.2 to fetch)."""
    for synth in (dev, prod, closed):
        sandbox = synth.stack.sandbox
        assert sandbox.task_role is None
        props = _props(synth, sandbox.task_definition)
        assert "TaskRoleArn" not in props, synth.stack.stack_name
        # the only role ECS tasks may assume is the execution role (the ECS agent's)
        assert _task_roles(synth) == {synth.logical_id(sandbox.execution_role)}
    # EFS: IAM-authorized mounts need a task role; what it may do is pinned in
    # test_ebs_is_the_default_and_efs_the_toggle
    sandbox = ext.stack.sandbox
    assert sandbox.task_role is not None
    props = _props(ext, sandbox.task_definition)
    assert props["TaskRoleArn"] == {"Fn::GetAtt": [ext.logical_id(sandbox.task_role), "Arn"]}
    assert _task_roles(ext) == {
        ext.logical_id(r) for r in (sandbox.task_role, sandbox.execution_role)
    }
    role = _props(ext, sandbox.task_role)
    assert "ManagedPolicyArns" not in role
    assert "Policies" not in role


def test_execution_role_pulls_the_image_and_writes_the_log_group_only(
    stages: tuple[Synth, ...], closed: Synth
) -> None:
    for synth in (*stages, closed):
        sandbox = synth.stack.sandbox
        role = _props(synth, sandbox.execution_role)
        assert "ManagedPolicyArns" not in role
        assert "Policies" not in role
        (policy,) = _policies_of(synth, sandbox.execution_role)
        granted = {
            (action, json.dumps(s["Resource"]))
            for s in policy["Statement"]
            for action in _list(s["Action"])
        }
        assert all(s["Effect"] == "Allow" and "Condition" not in s for s in policy["Statement"])
        logs = json.dumps({"Fn::GetAtt": [synth.logical_id(sandbox.log_group), "Arn"]})
        pulls = {r for a, r in granted if a == "ecr:BatchGetImage"}
        (repository,) = pulls  # the sandbox image's repository (the bootstrap asset repository)
        assert "container-assets" in repository
        assert granted == {
            ("ecr:BatchCheckLayerAvailability", repository),
            ("ecr:BatchGetImage", repository),
            ("ecr:GetDownloadUrlForLayer", repository),
            ("ecr:GetAuthorizationToken", '"*"'),  # no resource-level permissions
            ("logs:CreateLogStream", logs),
            ("logs:PutLogEvents", logs),
        }, synth.stack.stack_name


def test_infrastructure_role_manages_ebs_volumes_for_ecs(dev: Synth) -> None:
    sandbox = dev.stack.sandbox
    role = _props(dev, sandbox.infrastructure_role)
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "ecs.amazonaws.com"
    }
    (arn,) = role["ManagedPolicyArns"]
    assert arn["Fn::Join"][1][-1] == f":iam::aws:policy/{VOLUMES_POLICY}"
    assert _policies_of(dev, sandbox.infrastructure_role) == []


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _ingress(synth: Synth, group: Any) -> list[dict[str, Any]]:
    """Every ingress rule of a security group, inline or separate."""
    logical = synth.logical_id(group)
    rules = list(synth.data["Resources"][logical]["Properties"].get("SecurityGroupIngress", []))
    rules += [
        r["Properties"]
        for r in synth.resources("AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [logical, "GroupId"]}
    ]
    return rules


def _egress(synth: Synth, group: Any) -> list[dict[str, Any]]:
    logical = synth.logical_id(group)
    rules = list(synth.data["Resources"][logical]["Properties"].get("SecurityGroupEgress", []))
    rules += [
        r["Properties"]
        for r in synth.resources("AWS::EC2::SecurityGroupEgress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [logical, "GroupId"]}
    ]
    return rules


def test_only_the_control_plane_reaches_sandboxd(stages: tuple[Synth, ...]) -> None:
    for synth in stages:
        sandbox = synth.stack.sandbox
        control = synth.logical_id(sandbox.control_plane_sg)
        (rule,) = _ingress(synth, sandbox.sandbox_sg)
        assert rule["IpProtocol"] == "tcp"
        assert (rule["FromPort"], rule["ToPort"]) == (8080, 8080)
        assert rule["SourceSecurityGroupId"] == {"Fn::GetAtt": [control, "GroupId"]}
        assert "CidrIp" not in rule
        # the control plane accepts nothing, and sends HTTPS out and sandboxd's port in
        assert _ingress(synth, sandbox.control_plane_sg) == []
        egress = {
            (r.get("CidrIp") or json.dumps(r.get("DestinationSecurityGroupId")), r["FromPort"])
            for r in _egress(synth, sandbox.control_plane_sg)
        }
        sandbox_group = json.dumps(
            {"Fn::GetAtt": [synth.logical_id(sandbox.sandbox_sg), "GroupId"]}
        )
        assert egress == {("0.0.0.0/0", 443), (sandbox_group, 8080)}


def test_every_function_runs_in_the_private_subnets_with_the_control_plane_group(
    stages: tuple[Synth, ...],
) -> None:
    for synth in stages:
        sandbox = synth.stack.sandbox
        private = [{"Ref": synth.logical_id(s)} for s in sandbox.vpc.private_subnets]
        group = {"Fn::GetAtt": [synth.logical_id(sandbox.control_plane_sg), "GroupId"]}
        functions = synth.resources("AWS::Lambda::Function")
        assert len(functions) >= 3
        for logical, function in functions.items():
            vpc = function["Properties"]["VpcConfig"]
            assert vpc["SubnetIds"] == private, logical
            assert vpc["SecurityGroupIds"] == [group], logical
        for subnet in sandbox.vpc.public_subnets:
            props = _props(synth, subnet)
            assert props["MapPublicIpOnLaunch"] is False


def test_network_egress_endpoints_and_flow_logs(dev: Synth, prod: Synth, ext: Synth) -> None:
    for synth, nat in ((dev, 1), (prod, 2), (ext, 2)):
        synth.template.resource_count_is("AWS::EC2::NatGateway", nat)
    endpoints = {
        json.dumps(e["Properties"]["ServiceName"]): e["Properties"]["VpcEndpointType"]
        for e in dev.resources("AWS::EC2::VPCEndpoint").values()
    }
    assert sorted(endpoints.values()) == ["Gateway", "Gateway"]  # free: S3 and DynamoDB
    assert any(".s3" in name for name in endpoints)
    assert any(".dynamodb" in name for name in endpoints)
    _, flow_log = dev.one("AWS::EC2::FlowLog")
    assert flow_log["Properties"]["TrafficType"] == "ALL"
    assert flow_log["Properties"]["LogDestinationType"] == "s3"


def test_cluster_insights_follow_the_stage(dev: Synth, prod: Synth, ext: Synth) -> None:
    for synth, value in ((dev, "disabled"), (prod, "enabled"), (ext, "enabled")):
        (cluster,) = synth.resources("AWS::ECS::Cluster").values()
        settings = cluster["Properties"]["ClusterSettings"]
        assert settings == [{"Name": "containerInsights", "Value": value}], synth.stack.stack_name


def test_token_key_is_generated_and_readable_by_the_control_plane_only(
    stages: tuple[Synth, ...],
) -> None:
    for synth in stages:
        sandbox = synth.stack.sandbox
        secret = synth.logical_id(sandbox.token_secret)
        generated = synth.data["Resources"][secret]["Properties"]["GenerateSecretString"]
        assert generated == {"ExcludePunctuation": True, "PasswordLength": 64}
        functions = synth.resources("AWS::Lambda::Function").values()
        control_plane = {json.dumps(f["Properties"]["Role"]) for f in functions}
        # the identity policies that read it are exactly the functions' roles ...
        readers = {
            json.dumps({"Fn::GetAtt": [role["Ref"], "Arn"]})
            for policy in synth.resources("AWS::IAM::Policy").values()
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
            if statement["Resource"] == {"Ref": secret}
            for role in policy["Properties"]["Roles"]
        }
        assert readers == control_plane
        # ... and the secret's own policy denies every other principal
        (policy,) = synth.resources("AWS::SecretsManager::ResourcePolicy").values()
        (deny,) = policy["Properties"]["ResourcePolicy"]["Statement"]
        assert deny["Effect"] == "Deny"
        assert deny["Principal"] == {"AWS": "*"}
        assert deny["Action"] == "secretsmanager:GetSecretValue"
        allowed = deny["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
        assert {json.dumps(a) for a in allowed} == control_plane
        assert policy["Properties"]["SecretId"] == {"Ref": secret}


def test_ebs_is_the_default_and_efs_the_toggle(dev: Synth, ext: Synth) -> None:
    dev.template.resource_count_is("AWS::EFS::FileSystem", 0)
    sandbox = ext.stack.sandbox
    assert sandbox.file_system is not None
    props = _props(ext, sandbox.file_system)
    assert props["Encrypted"] is True
    statements = {s["Sid"]: s for s in props["FileSystemPolicy"]["Statement"]}
    assert set(statements) == {"TlsOnly", "AccessPointsOnly"}  # no allow: no anonymous mounts
    assert statements["AccessPointsOnly"]["Effect"] == "Deny"
    assert statements["AccessPointsOnly"]["Condition"] == {
        "Null": {"elasticfilesystem:AccessPointArn": "true"}
    }
    # NFS only from the sandboxes
    (group_id,) = {
        json.dumps(m["Properties"]["SecurityGroups"])
        for m in ext.resources("AWS::EFS::MountTarget").values()
    }
    (group,) = [
        logical
        for logical, g in ext.resources("AWS::EC2::SecurityGroup").items()
        if json.dumps([{"Fn::GetAtt": [logical, "GroupId"]}]) == group_id
    ]
    rules = [
        r["Properties"]
        for r in ext.resources("AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [group, "GroupId"]}
    ]
    assert [(r["FromPort"], r["SourceSecurityGroupId"]) for r in rules] == [
        (2049, {"Fn::GetAtt": [ext.logical_id(sandbox.sandbox_sg), "GroupId"]})
    ]
    # the task role may mount through access points and nothing else
    (policy,) = _policies_of(ext, sandbox.task_role)
    (statement,) = policy["Statement"]
    assert set(statement["Action"]) == {
        "elasticfilesystem:ClientMount",
        "elasticfilesystem:ClientWrite",
    }
    assert "elasticfilesystem:AccessPointArn" in statement["Condition"]["StringLike"]


def test_the_functions_get_the_driver_settings(dev: Synth, ext: Synth) -> None:
    for synth, storage in ((dev, "ebs"), (ext, "efs")):
        for function in synth.resources("AWS::Lambda::Function").values():
            env = function["Properties"]["Environment"]["Variables"]
            assert env["OPENAGENTS_SANDBOX_DRIVER"] == "fargate"
            assert env["OPENAGENTS_FARGATE_STORAGE"] == storage
            assert ("OPENAGENTS_FARGATE_EBS_ROLE_ARN" in env) is (storage == "ebs")
            assert ("OPENAGENTS_FARGATE_EFS_FILE_SYSTEM_ID" in env) is (storage == "efs")
            assert env["OPENAGENTS_FARGATE_SECURITY_GROUPS"] == {
                "Fn::Join": [
                    "",
                    [
                        '["',
                        {
                            "Fn::GetAtt": [
                                synth.logical_id(synth.stack.sandbox.sandbox_sg),
                                "GroupId",
                            ]
                        },
                        '"]',
                    ],
                ]
            }
