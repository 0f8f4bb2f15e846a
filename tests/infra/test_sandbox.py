"""Sandbox: the network the sandboxes and the control plane share, who may reach sandboxd, the
Fargate task definition the driver expects, its roles, the token key, and the EFS variant."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from openagents.sandbox.fargate_storage import FargateConfig

from infra.config import StageConfig
from infra.constructs.agent import HANDLER as AGENT_HANDLER
from infra.constructs.sandbox import (
    CONTAINER_NAME,
    INIT_CONTAINER,
    NO_PROXY,
    PROXY_VARIABLES,
    SANDBOX_PORT,
    VOLUME_NAME,
)
from tests.infra.conftest import GITHUB_TOKEN, PROXY, ROOT, Synth

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
    stages: tuple[Synth, ...],
) -> None:
    for synth in stages:
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
        # the control-plane Lambdas and the agent turns (their own group, test_agent.py)
        agent = synth.logical_id(synth.stack.agent.security_group)
        rules = sorted(_ingress(synth, sandbox.sandbox_sg), key=json.dumps)
        sources = [r["SourceSecurityGroupId"] for r in rules]
        assert sorted(sources, key=json.dumps) == sorted(
            ({"Fn::GetAtt": [control, "GroupId"]}, {"Fn::GetAtt": [agent, "GroupId"]}),
            key=json.dumps,
        )
        own = {"Fn::GetAtt": [synth.logical_id(sandbox.sandbox_sg), "GroupId"]}
        for rule in rules:
            assert rule["IpProtocol"] == "tcp"
            assert (rule["FromPort"], rule["ToPort"]) == (8080, 8080)
            assert "CidrIp" not in rule
            # not even another sandbox (the group does not admit itself)
            assert rule["SourceSecurityGroupId"] != own
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


def test_no_security_group_admits_an_address_range(stages: tuple[Synth, ...]) -> None:
    """Nothing in the VPC accepts traffic from a CIDR (0.0.0.0/0 or any other): every ingress
    rule names a security group, so a sandbox is reachable only from the control plane, and the
    endpoints and EFS only from the groups they serve."""
    for synth in stages:
        groups = synth.resources("AWS::EC2::SecurityGroup")
        rules = [
            r for g in groups.values() for r in g["Properties"].get("SecurityGroupIngress", [])
        ]
        rules += [
            r["Properties"] for r in synth.resources("AWS::EC2::SecurityGroupIngress").values()
        ]
        assert rules, synth.stack.stack_name
        for rule in rules:
            assert "CidrIp" not in rule, rule
            assert "CidrIpv6" not in rule, rule
            assert "SourcePrefixListId" not in rule, rule
            assert "SourceSecurityGroupId" in rule, rule


def _environment(container: dict[str, Any]) -> dict[str, Any]:
    return {e["Name"]: e["Value"] for e in container.get("Environment", [])}


def _references(value: Any) -> set[str]:
    """The logical ids a template value refers to (Ref, Fn::GetAtt, Fn::Sub)."""
    if isinstance(value, list):
        return set().union(*(_references(v) for v in value)) if value else set()
    if not isinstance(value, dict):
        return set()
    found: set[str] = set()
    for key, item in value.items():
        if key == "Ref" and isinstance(item, str) and not item.startswith("AWS::"):
            found.add(item)
        elif key == "Fn::GetAtt":
            found.add(item[0])
        elif key == "Fn::Sub":
            text = item if isinstance(item, str) else item[0]
            found |= {n.split(".")[0] for n in re.findall(r"\$\{([^}!]+)\}", text)}
            found -= {n for n in found if n.startswith("AWS::")}
        else:
            found |= _references(item)
    return found


def test_no_secret_or_store_coordinate_reaches_the_task_definition(
    stages: tuple[Synth, ...],
) -> None:
    """No model key, JWT secret, GitHub token, token key or store credential is in the task
    definition: no ``Secrets``, no environment but the proxy's address (``proxy``), and the
    definition refers to nothing but its roles and its log group (not the table, the bucket,
    a secret, the user pool or the bus). The per-task token is a RunTask override
    (tests/infra/test_least_privilege.py pins that request)."""
    for synth in stages:
        sandbox = synth.stack.sandbox
        props = _props(synth, sandbox.task_definition)
        for container in props["ContainerDefinitions"]:
            for key in ("Secrets", "EnvironmentFiles", "RepositoryCredentials"):
                assert key not in container, (synth.stack.stack_name, container["Name"], key)
        containers = _containers(synth)
        assert "Environment" not in containers[INIT_CONTAINER]
        environment = _environment(containers[CONTAINER_NAME])
        if synth.stack.config.sandbox_egress == "proxy":
            assert set(environment) == {*PROXY_VARIABLES, "NO_PROXY", "no_proxy"}
            assert {environment[n] for n in PROXY_VARIABLES} == {PROXY}
            assert environment["NO_PROXY"] == environment["no_proxy"] == NO_PROXY
        else:
            assert environment == {}, synth.stack.stack_name
        for name, value in environment.items():
            assert isinstance(value, str), (name, value)  # a literal, never a reference
            assert not re.search(r"KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL|JWT", name, re.I), name
            assert "@" not in value, (name, value)  # no user:password@proxy
        allowed = {synth.logical_id(sandbox.execution_role), synth.logical_id(sandbox.log_group)}
        if sandbox.task_role is not None:
            allowed.add(synth.logical_id(sandbox.task_role))
        assert _references(props) <= allowed, synth.stack.stack_name
        text = json.dumps(props)
        secrets = synth.resources("AWS::SecretsManager::Secret")
        assert secrets
        for marker in (*secrets, "secretsmanager", "ssm:", GITHUB_TOKEN):
            assert marker not in text, (synth.stack.stack_name, marker)


def test_egress_open_is_the_default(dev: Synth, prod: Synth) -> None:
    for synth in (dev, prod):
        sandbox = synth.stack.sandbox
        assert synth.stack.config.sandbox_egress == "open"
        # all egress, through the private subnets' NAT route (git, registries)
        group = synth.data["Resources"][synth.logical_id(sandbox.sandbox_sg)]["Properties"]
        assert group["SecurityGroupEgress"] == [
            {
                "CidrIp": "0.0.0.0/0",
                "Description": "Allow all outbound traffic by default",
                "IpProtocol": "-1",
            }
        ]
        assert _driver_subnets(synth) == _subnet_refs(synth, sandbox.vpc.private_subnets)
        assert sandbox.vpc.isolated_subnets == []
        assert sandbox.endpoint_sg is None
        synth.template.resource_count_is("AWS::EC2::VPCEndpoint", 2)  # S3, DynamoDB gateways


def _subnet_refs(synth: Synth, subnets: list[Any]) -> list[dict[str, str]]:
    return [{"Ref": synth.logical_id(s)} for s in subnets]


def _driver_subnets(synth: Synth) -> list[Any]:
    """The subnets the driver starts sandbox tasks in (``OPENAGENTS_FARGATE_SUBNETS``)."""
    _, api = synth.function("functions.api.handler.lambda_handler")
    joined = api["Environment"]["Variables"]["OPENAGENTS_FARGATE_SUBNETS"]["Fn::Join"][1]
    return [part for part in joined if isinstance(part, dict)]


def _route_table(synth: Synth, subnet: Any) -> dict[str, str]:
    return {"Ref": synth.stack.get_logical_id(subnet.node.find_child("RouteTable"))}


def test_egress_none_and_proxy_keep_sandboxes_off_the_nat(ext: Synth, closed: Synth) -> None:
    """``none``/``proxy``: the sandboxes run in isolated subnets whose only routes are the VPC
    and an S3 endpoint that admits ECR's layer bucket only; the security group sends 443 (the
    endpoints, the layers), NFS to EFS, and the proxy's port; the endpoints are exactly what
    the task's ENI needs to pull the image and ship its logs."""
    for synth in (ext, closed):
        sandbox = synth.stack.sandbox
        name = synth.stack.stack_name
        isolated = sandbox.vpc.isolated_subnets
        assert len(isolated) == 2, name
        assert _driver_subnets(synth) == _subnet_refs(synth, isolated), name
        # the control plane stays where it was (NAT for the AWS APIs)
        for function in control_plane_functions(synth).values():
            subnets = function["Properties"]["VpcConfig"]["SubnetIds"]
            assert subnets == _subnet_refs(synth, sandbox.vpc.private_subnets)
        # no route out: no NAT gateway, internet gateway, peering or transit gateway target
        tables = [_route_table(synth, s) for s in isolated]
        routes = [
            r["Properties"]
            for r in synth.resources("AWS::EC2::Route").values()
            if r["Properties"]["RouteTableId"] in tables
        ]
        assert routes == [], (name, routes)
        # gateway endpoints on the sandbox route tables: one, S3, ECR's layer bucket only
        gateways = {
            logical: e["Properties"]
            for logical, e in synth.resources("AWS::EC2::VPCEndpoint").items()
            if e["Properties"]["VpcEndpointType"] == "Gateway"
        }
        on_sandbox = [g for g in gateways.values() if any(t in g["RouteTableIds"] for t in tables)]
        (layers,) = on_sandbox
        assert set(map(json.dumps, layers["RouteTableIds"])) == set(map(json.dumps, tables))
        assert layers["ServiceName"]["Fn::Join"][1][-1] == ".s3"
        (statement,) = layers["PolicyDocument"]["Statement"]
        assert statement["Effect"] == "Allow"
        assert statement["Action"] == "s3:GetObject"
        assert statement["Resource"]["Fn::Join"][1][-1] == "-starport-layer-bucket/*"
        assert ":s3:::prod-" in statement["Resource"]["Fn::Join"][1]
        # interface endpoints: ECR api + dkr and CloudWatch Logs, only from the two groups
        interfaces = [
            e["Properties"]
            for e in synth.resources("AWS::EC2::VPCEndpoint").values()
            if e["Properties"]["VpcEndpointType"] == "Interface"
        ]
        services = sorted(e["ServiceName"]["Fn::Join"][1][-1] for e in interfaces)
        assert services == [".ecr.api", ".ecr.dkr", ".logs"], name
        assert sandbox.endpoint_sg is not None
        endpoint_group = {"Fn::GetAtt": [synth.logical_id(sandbox.endpoint_sg), "GroupId"]}
        for endpoint in interfaces:
            assert endpoint["PrivateDnsEnabled"] is True
            assert endpoint["SecurityGroupIds"] == [endpoint_group]
            assert endpoint["SubnetIds"] == _subnet_refs(synth, isolated)
            # no exfiltration with someone else's credentials through the endpoint
            (allow,) = endpoint["PolicyDocument"]["Statement"]
            assert allow["Effect"] == "Allow"
            assert allow["Condition"] == {
                "StringEquals": {"aws:PrincipalAccount": {"Ref": "AWS::AccountId"}}
            }
        admitted = {
            (r["FromPort"], json.dumps(r["SourceSecurityGroupId"]))
            for r in _ingress(synth, sandbox.endpoint_sg)
        }
        groups = (sandbox.sandbox_sg, sandbox.control_plane_sg)
        assert admitted == {
            (443, json.dumps({"Fn::GetAtt": [synth.logical_id(g), "GroupId"]})) for g in groups
        }
        # the sandbox group's egress: nothing but these
        egress = {
            (
                r["IpProtocol"],
                r["FromPort"],
                json.dumps(r.get("CidrIp") or r.get("DestinationSecurityGroupId")),
            )
            for r in _egress(synth, sandbox.sandbox_sg)
        }
        expected = {("tcp", 443, '"0.0.0.0/0"')}
        if sandbox.file_system is not None:
            (efs_group,) = sandbox.file_system.connections.security_groups
            efs_ref = {"Fn::GetAtt": [synth.logical_id(efs_group), "GroupId"]}
            expected.add(("tcp", 2049, json.dumps(efs_ref)))
        if synth.stack.config.sandbox_egress == "proxy":
            vpc_cidr = {"Fn::GetAtt": [synth.logical_id(sandbox.vpc), "CidrBlock"]}
            expected.add(("tcp", 3128, json.dumps(vpc_cidr)))
        assert egress == expected, name
    assert closed.stack.config.sandbox_egress == "none"
    assert ext.stack.config.sandbox_egress == "proxy"


OUTBOX_HANDLER = "functions.outbox.handler.lambda_handler"


def control_plane_functions(synth: Synth) -> dict[str, Any]:
    """The functions that drive sandboxes: all but the outbox pipe's enrichment, which only
    reshapes stream records (no VPC, no sandbox, no token; tests/infra/test_outbox.py)."""
    return {
        logical: function
        for logical, function in synth.resources("AWS::Lambda::Function").items()
        if function["Properties"]["Handler"] != OUTBOX_HANDLER
    }


def test_every_function_runs_in_the_private_subnets_with_the_control_plane_group(
    stages: tuple[Synth, ...],
) -> None:
    for synth in stages:
        sandbox = synth.stack.sandbox
        private = [{"Ref": synth.logical_id(s)} for s in sandbox.vpc.private_subnets]
        group = {"Fn::GetAtt": [synth.logical_id(sandbox.control_plane_sg), "GroupId"]}
        functions = control_plane_functions(synth)
        assert len(functions) >= 3
        agent_sg = synth.logical_id(synth.stack.agent.security_group)
        agent_group = {"Fn::GetAtt": [agent_sg, "GroupId"]}
        for logical, function in functions.items():
            vpc = function["Properties"]["VpcConfig"]
            assert vpc["SubnetIds"] == private, logical
            # the agent turns have a group of their own (tests/infra/test_agent.py)
            durable = function["Properties"]["Handler"] == AGENT_HANDLER
            assert vpc["SecurityGroupIds"] == [agent_group if durable else group], logical
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
        functions = control_plane_functions(synth).values()
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
        for function in control_plane_functions(synth).values():
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


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"sandbox_egress": "closed"}, "sandboxEgress 'closed'"),
        ({"sandbox_egress": "proxy"}, "sandboxEgressProxy goes with sandboxEgress=proxy"),
        ({"sandbox_egress_proxy": "http://p:3128"}, "goes with sandboxEgress=proxy"),
        (
            {"sandbox_egress": "none", "sandbox_egress_proxy_cidr": "10.0.0.0/8"},
            "only goes with sandboxEgress=proxy",
        ),
        (
            {"sandbox_egress": "proxy", "sandbox_egress_proxy": "http://u:pw@proxy:3128"},
            "no credentials",
        ),
        ({"sandbox_egress": "proxy", "sandbox_egress_proxy": "https://proxy"}, "http://host:port"),
        ({"sandbox_egress": "proxy", "sandbox_egress_proxy": "http://p:70000"}, "http://host:port"),
        (
            {
                "sandbox_egress": "proxy",
                "sandbox_egress_proxy": "http://p:3128",
                "sandbox_egress_proxy_cidr": "proxy.internal",
            },
            "an IPv4 CIDR",
        ),
    ],
)
def test_egress_config_is_validated(context: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        StageConfig(**context)


def test_the_proxy_cidr_defaults_to_the_proxy_address_or_the_vpc() -> None:
    def config(proxy: str, cidr: str | None = None) -> StageConfig:
        return StageConfig(
            sandbox_egress="proxy", sandbox_egress_proxy=proxy, sandbox_egress_proxy_cidr=cidr
        )

    assert config("http://10.40.3.4:3128").proxy_cidr == "10.40.3.4/32"
    assert config("http://proxy.internal:8080/").proxy_cidr is None  # the VPC's CIDR
    assert config("http://proxy.internal:8080", "10.9.0.0/16").proxy_cidr == "10.9.0.0/16"
    assert config("http://proxy.internal:8080").proxy_port == 8080
    assert StageConfig().sandbox_isolated is False
    assert StageConfig(sandbox_egress="none").sandbox_isolated is True
