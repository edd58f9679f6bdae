"""The deployment files, checked with the libraries' own schemas and classes.

* ``Dockerfile``: what it copies exists, its pins are pyproject.toml's, and the command it runs (the
  one the Helm chart's user deployment runs too) serves the code location, here on a loopback port.
* ``deploy/k8s/values.yaml``: the instance the chart renders from it (``render_chart_instance``, the
  chart's configmap templates written out for the sections it sets) is built as a ``DagsterInstance``
  on a real Postgres, with its ``K8sRunLauncher`` reading a kubeconfig that points at 127.0.0.1.
* ``deploy/ecs/dagster.yaml``: the same, with dagster-aws's ``EcsRunLauncher``.
* The k8s resource set: its executor's config and the evidence step's ``dagster-k8s/config`` op tags
  validate against a job of the project's assets, and land in the step's Kubernetes Job as a GPU.
"""

import json
import os
import re
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import dagster as dg
import pytest
import yaml

from .helpers import stop

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _pin(requirements: list[str], name: str) -> str:
    found = [r for r in requirements if re.match(rf"{re.escape(name)}\s*==", r)]
    assert len(found) == 1, (name, requirements)
    return found[0].split("==", 1)[1].strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_dockerfile_copies_what_exists_pins_what_pyproject_pins_and_runs_as_a_user():
    steps = _dockerfile()
    assert steps[0] == ("FROM", "python:3.11-slim")
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    copied = []
    for word, args in steps:
        if word == "COPY":
            *sources, _dest = args.split()
            copied += sources
    assert copied, "the Dockerfile copies nothing"
    for src in copied:
        assert (ROOT / src).exists(), f"COPY {src}: no such file in the project"
        assert src not in ignored, f"COPY {src}: excluded by .dockerignore"
    # Every package setuptools installs is copied (else `pip install .` builds an image without it).
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {p.rstrip("*") for p in packages} <= set(copied)
    # The readme pyproject.toml names is needed to build the project.
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["readme"] in copied

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    args = dict(a.split("=", 1) for w, a in steps if w == "ARG")
    assert args["TORCH_VERSION"] == _pin(deps, "torch")
    runs = " ".join(a for w, a in steps if w == "RUN")
    assert "https://download.pytorch.org/whl/cpu" in runs and 'pip install ".[k8s]"' in runs
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert _pin(extras["k8s"], "dagster-k8s") == _pin(extras["dev"], "dagster-k8s")
    rapidocr = re.search(r"--no-deps rapidocr-onnxruntime==(\S+)", (ROOT / "Makefile").read_text()).group(1)
    assert f"--no-deps rapidocr-onnxruntime=={rapidocr}" in runs  # as the Makefile installs it
    assert "opencv-python-headless" in " ".join(deps)  # the headless OpenCV comes with the project
    users = [a for w, a in steps if w == "USER"]
    assert users and users[-1] not in ("0", "root"), "the image must not run as root"
    assert not [a for w, a in steps if w == "ENTRYPOINT"], "run/step Jobs set args that must run as given"


def _chart_values() -> dict:
    return yaml.safe_load((ROOT / "deploy" / "k8s" / "values.yaml").read_text())


def _cmd() -> list[str]:
    return json.loads(next(a for w, a in _dockerfile() if w == "CMD"))


def test_the_image_command_and_the_charts_user_deployment_serve_the_code_location(tmp_path):
    """The chart's user deployment runs ``dagster code-server start -h 0.0.0.0 -p <port> <codeServerArgs>``
    (its deployment-user.yaml template); that is the image's CMD. Run it here on a loopback port with
    the deployment's environment and load the code location from it over gRPC."""
    deployment = _chart_values()["dagster-user-deployments"]["deployments"][0]
    chart_args = ["dagster", "code-server", "start", "-h", "0.0.0.0", "-p", str(deployment["port"]),
                  *deployment["codeServerArgs"]]
    cmd = _cmd()
    assert cmd == chart_args
    port = _free_port()
    local = [str(BIN / cmd[0]), *cmd[1:]]
    local[local.index("-h") + 1] = "127.0.0.1"
    local[local.index("-p") + 1] = str(port)
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT),
           "DAGSTER_HOME": str(tmp_path / "dagster_home"), "ARGUS_HOME": str(tmp_path / "argus_home"),
           "ARGUS_S3_BUCKET": "argus-test", **{e["name"]: e["value"] for e in deployment["env"]}}
    env["ARGUS_HOME"] = str(tmp_path / "argus_home")  # the image's folder, here a temporary one
    assert env["ARGUS_ENV"] == "k8s"
    (tmp_path / "dagster_home").mkdir()
    (tmp_path / "dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen(local, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline, healthy = time.time() + 180, None
        while time.time() < deadline:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            healthy = subprocess.run([str(BIN / "dagster"), "api", "grpc-health-check", "-p", str(port)],
                                     env=env, capture_output=True, text=True)
            if healthy.returncode == 0:
                break
            time.sleep(2)
        assert healthy is not None and healthy.returncode == 0, (tmp_path / "server.log").read_text()[-3000:]
        # The server answers with the code location's definitions, loaded without error.
        done = subprocess.run([str(BIN / "dagster"), "definitions", "validate", "--grpc-host", "127.0.0.1",
                               "--grpc-port", str(port)], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    finally:
        stop(proc)
        log.close()


# --- The chart's instance --------------------------------------------------------------------------


def render_chart_instance(values: dict, release: str = "argus", namespace: str = "argus") -> dict:
    """The ``dagster.yaml`` the chart's ``<release>-instance`` ConfigMap holds for these values, for the
    sections it sets: run launcher (templates/helpers/instance/_run-launcher.tpl, K8sRunLauncher),
    run coordinator (_run-coordinator.tpl, QueuedRunCoordinator), run/event-log/schedule storage
    (configmap-instance.yaml with _postgresql.tpl), op concurrency pools (_concurrency.tpl), run
    monitoring, telemetry and python logs (configmap-instance.yaml). A values key the templates do not read is an error here, so a typo in
    values.yaml fails instead of being dropped as the chart would drop it."""
    known = {"dagster-user-deployments", "runLauncher", "dagsterDaemon", "postgresql", "telemetry", "pythonLogs",
             "concurrency"}
    assert set(values) <= known, set(values) - known
    out: dict = {}

    pg = values["postgresql"]
    assert set(pg) <= {"enabled", "postgresqlHost", "postgresqlUsername", "postgresqlPassword", "postgresqlDatabase",
                       "service", "postgresqlParams", "postgresqlScheme"}
    # dagster.postgresql.host: the chart's own server's service, else postgresqlHost.
    host = f"{release}-postgresql" if pg.get("enabled") else pg["postgresqlHost"]
    postgres_db = {"username": pg["postgresqlUsername"], "password": {"env": "DAGSTER_PG_PASSWORD"},
                   "hostname": host, "db_name": pg["postgresqlDatabase"], "port": pg["service"]["port"],
                   "params": pg.get("postgresqlParams", {})}
    if pg.get("postgresqlScheme"):
        postgres_db["scheme"] = pg["postgresqlScheme"]
    for section, module, cls in (("schedule_storage", "dagster_postgres.schedule_storage", "PostgresScheduleStorage"),
                                 ("run_storage", "dagster_postgres.run_storage", "PostgresRunStorage"),
                                 ("event_log_storage", "dagster_postgres.event_log", "PostgresEventLogStorage")):
        out[section] = {"module": module, "class": cls, "config": {"postgres_db": postgres_db}}

    launcher = values["runLauncher"]
    assert launcher["type"] == "K8sRunLauncher"
    k8s = launcher["config"]["k8sRunLauncher"]
    assert set(k8s) <= {"image", "imagePullPolicy", "loadInclusterConfig", "kubeconfigFile", "jobNamespace",
                        "envConfigMaps", "envSecrets", "envVars", "volumeMounts", "volumes"}
    cfg: dict = {"load_incluster_config": k8s["loadInclusterConfig"]}
    if k8s.get("kubeconfigFile"):
        cfg["kubeconfig_file"] = k8s["kubeconfigFile"]
    cfg.update(job_namespace=k8s.get("jobNamespace") or namespace, image_pull_policy=k8s["imagePullPolicy"],
               service_account_name=f"{release}-dagster",  # dagster.serviceAccountName
               dagster_home={"env": "DAGSTER_HOME"}, instance_config_map={"env": "DAGSTER_K8S_INSTANCE_CONFIG_MAP"},
               postgres_password_secret={"env": "DAGSTER_K8S_PG_PASSWORD_SECRET"},
               env_config_maps=[{"env": "DAGSTER_K8S_PIPELINE_RUN_ENV_CONFIGMAP"},
                                *[c["name"] for c in k8s.get("envConfigMaps", []) if "name" in c]])
    if k8s.get("envSecrets"):
        cfg["env_secrets"] = [s["name"] for s in k8s["envSecrets"] if "name" in s]
    for key, field in (("envVars", "env_vars"), ("volumeMounts", "volume_mounts"), ("volumes", "volumes")):
        if k8s.get(key):
            cfg[field] = k8s[key]
    out["run_launcher"] = {"module": "dagster_k8s", "class": "K8sRunLauncher", "config": cfg}

    daemon = values["dagsterDaemon"]
    coordinator = daemon["runCoordinator"]
    if daemon["enabled"] and coordinator["enabled"]:
        assert coordinator["type"] == "QueuedRunCoordinator"
        q = coordinator["config"]["queuedRunCoordinator"]
        assert set(q) <= {"maxConcurrentRuns", "tagConcurrencyLimits", "dequeueIntervalSeconds"}
        qc = {}
        for key, field in (("maxConcurrentRuns", "max_concurrent_runs"), ("tagConcurrencyLimits", "tag_concurrency_limits"),
                           ("dequeueIntervalSeconds", "dequeue_interval_seconds")):
            if q.get(key):
                qc[field] = q[key]
        out["run_coordinator"] = {"module": "dagster._core.run_coordinator", "class": "QueuedRunCoordinator",
                                  **({"config": qc} if qc else {})}
        # Some chart versions write max_concurrent_runs: -1 when any key is set but maxConcurrentRuns.
        assert not qc or "max_concurrent_runs" in qc, "set every run limit under concurrency.runs, or none here"
    monitoring = daemon.get("runMonitoring", {})
    if daemon["enabled"] and monitoring.get("enabled"):
        out["run_monitoring"] = {"enabled": True, "start_timeout_seconds": monitoring["startTimeoutSeconds"],
                                 "poll_interval_seconds": monitoring["pollIntervalSeconds"]}
        if monitoring.get("maxResumeRunAttempts"):
            out["run_monitoring"]["max_resume_run_attempts"] = monitoring["maxResumeRunAttempts"]
    # helpers/instance/_concurrency.tpl: pools and runs.
    concurrency = values.get("concurrency", {})
    assert set(concurrency) <= {"pools", "runs"}
    pools, runs = concurrency.get("pools", {}), concurrency.get("runs", {})
    assert set(pools) <= {"defaultLimit", "granularity", "opGranularityRunBuffer"}
    assert set(runs) <= {"maxConcurrentRuns", "tagConcurrencyLimits"}
    section = {}
    rendered_pools = {field: pools[key] for key, field in (("defaultLimit", "default_limit"), ("granularity", "granularity"),
                                                           ("opGranularityRunBuffer", "op_granularity_run_buffer"))
                      if pools.get(key) is not None}
    if rendered_pools:
        section["pools"] = rendered_pools
    rendered_runs = {}
    if runs.get("maxConcurrentRuns") is not None:
        rendered_runs["max_concurrent_runs"] = runs["maxConcurrentRuns"]
    if runs.get("tagConcurrencyLimits"):
        rendered_runs["tag_concurrency_limits"] = [
            {"key": t["key"], **({"value": t["value"]} if t.get("value") else {}), "limit": t["limit"]}
            for t in runs["tagConcurrencyLimits"]]
    if rendered_runs:
        section["runs"] = rendered_runs
    if section:
        out["concurrency"] = section
    out["telemetry"] = {"enabled": values.get("telemetry", {}).get("enabled", True)}
    if values.get("pythonLogs", {}).get("pythonLogLevel"):
        out["python_logs"] = {"python_log_level": values["pythonLogs"]["pythonLogLevel"]}
    return out


def _kubeconfig(path: Path) -> Path:
    """A kubeconfig for an API server on 127.0.0.1 (nothing listens there: building the launcher reads
    the file, it sends no request)."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "loopback",
        "clusters": [{"name": "loopback", "cluster": {"server": f"https://127.0.0.1:{_free_port()}",
                                                      "insecure-skip-tls-verify": True}}],
        "users": [{"name": "test", "user": {"token": "unused"}}],
        "contexts": [{"name": "loopback", "context": {"cluster": "loopback", "user": "test", "namespace": "argus"}}],
    }))
    return path


def _pg_parts(url: str) -> dict:
    m = re.match(r"postgresql\+psycopg2://(?P<user>[^@]+)@(?P<host>[^:]+):(?P<port>\d+)/(?P<db>\w+)$", url)
    assert m, url
    return m.groupdict()


def _check_queue_and_storage(instance: dg.DagsterInstance) -> None:
    assert isinstance(instance.run_coordinator, dg.QueuedRunCoordinator)
    # What the daemon's queue reads (run_queue, the run coordinator's config or concurrency.runs).
    queue = instance.get_concurrency_config().run_queue_config
    assert queue.max_concurrent_runs == 8
    limits = queue.tag_concurrency_limits
    assert [(t["key"], t["limit"]) for t in limits] == [("argus/judge", 4)]
    assert instance.run_monitoring_enabled and instance.run_monitoring_start_timeout_seconds == 300
    # The storage is the real server: a run written through this instance is read back.
    run = instance.create_run_for_job(dg.GraphDefinition("probe").to_job(), tags={"argus/judge": "true"})
    assert instance.get_run_by_id(run.run_id).tags["argus/judge"] == "true"
    instance.delete_run(run.run_id)


def test_the_charts_instance_from_our_values_builds_a_k8s_launcher_queue_and_postgres(postgres_url, tmp_path,
                                                                                    monkeypatch):
    from dagster_k8s import K8sRunLauncher

    values = _chart_values()
    rendered = render_chart_instance(values)
    assert rendered["run_launcher"]["config"]["env_secrets"] == ["argus-env"]
    assert rendered["run_launcher"]["config"]["load_incluster_config"] is True
    # SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3; dagster-postgres installs psycopg2.
    assert rendered["run_storage"]["config"]["postgres_db"]["scheme"] == "postgresql+psycopg2"
    # Here the cluster is a loopback kubeconfig, and the database the test's server, as the chart
    # would get them from `loadInclusterConfig: false` + `kubeconfigFile` and an external postgresqlHost.
    pg = _pg_parts(postgres_url)
    values["runLauncher"]["config"]["k8sRunLauncher"].update(
        loadInclusterConfig=False, kubeconfigFile=str(_kubeconfig(tmp_path / "kubeconfig")))
    values["postgresql"].update(enabled=False, postgresqlHost=pg["host"], postgresqlUsername=pg["user"],
                                postgresqlDatabase=pg["db"], service={"port": int(pg["port"])})
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(yaml.safe_dump(render_chart_instance(values)))
    # What the chart sets on the daemon's and webserver's pods.
    for k, v in {"DAGSTER_HOME": str(home), "DAGSTER_PG_PASSWORD": "unused (trust)",
                 "DAGSTER_K8S_INSTANCE_CONFIG_MAP": "argus-dagster-instance",
                 "DAGSTER_K8S_PG_PASSWORD_SECRET": "argus-postgresql-secret",
                 "DAGSTER_K8S_PIPELINE_RUN_ENV_CONFIGMAP": "argus-dagster-pipeline-env"}.items():
        monkeypatch.setenv(k, v)
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        launcher = instance.run_launcher
        assert isinstance(launcher, K8sRunLauncher)
        assert launcher.env_secrets == ["argus-env"] and launcher.job_namespace == "argus"
        assert "ARGUS_ENV=k8s" in launcher.env_vars
        # The `gpu` pool (the evidence step's) gets the chart's default pool limit.
        pools = instance.get_concurrency_config().pool_config
        assert pools.default_pool_limit == values["concurrency"]["pools"]["defaultLimit"]
        _check_queue_and_storage(instance)
    finally:
        instance.dispose()


def test_the_ecs_instance_file_builds_an_ecs_launcher_queue_and_postgres(postgres_url, tmp_path, monkeypatch):
    from dagster_aws.ecs import EcsRunLauncher

    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((ROOT / "deploy" / "ecs" / "dagster.yaml").read_text())
    for k, v in {"DAGSTER_PG_URL": postgres_url, "AWS_DEFAULT_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "test",
                 "AWS_SECRET_ACCESS_KEY": "test",
                 "ARGUS_ECS_EXECUTION_ROLE_ARN": "arn:aws:iam::123456789012:role/argus-execution",
                 "ARGUS_ECS_TASK_ROLE_ARN": "arn:aws:iam::123456789012:role/argus-run"}.items():
        monkeypatch.setenv(k, v)
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        launcher = instance.run_launcher
        assert isinstance(launcher, EcsRunLauncher)
        assert launcher.task_definition_dict["task_role_arn"] == "arn:aws:iam::123456789012:role/argus-run"
        assert launcher.run_resources == {"cpu": "4096", "memory": "16384"}
        assert "ARGUS_ENV=aws" in launcher.env_vars
        _check_queue_and_storage(instance)
    finally:
        instance.dispose()


def test_the_three_instance_files_share_one_run_queue():
    aws = yaml.safe_load((ROOT / "deploy" / "aws" / "dagster.yaml").read_text())
    ecs = yaml.safe_load((ROOT / "deploy" / "ecs" / "dagster.yaml").read_text())
    k8s = render_chart_instance(_chart_values())
    assert aws["run_queue"] == ecs["run_queue"]
    assert k8s["concurrency"]["runs"]["max_concurrent_runs"] == aws["run_queue"]["max_concurrent_runs"]
    assert k8s["concurrency"]["runs"]["tag_concurrency_limits"] == aws["run_queue"]["tag_concurrency_limits"]
    assert aws["run_monitoring"] == ecs["run_monitoring"]


# --- The k8s resource set: executor config and the GPU step's op tags ------------------------------


def _k8s_job(monkeypatch) -> dg.JobDefinition:
    from argus_dagster.assets import ALL_ASSETS
    from argus_dagster.resources import executor_for, resources_for

    monkeypatch.setenv("ARGUS_S3_BUCKET", "argus-test")
    defs = dg.Definitions(assets=ALL_ASSETS, resources=resources_for("k8s"), executor=executor_for("k8s"),
                          jobs=[dg.define_asset_job("candidates", selection=dg.AssetSelection.groups("candidates"))])
    return defs.resolve_job_def("candidates")


def test_the_k8s_environment_keeps_dagster_k8s_out_of_the_default_import_path():
    code = ("import sys; import argus_dagster.location as d; "
            "assert 'dagster_k8s' not in sys.modules, 'dagster_k8s imported'; "
            "print(d.defs().executor.name)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "ARGUS_ENV": "local"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "in_process"


def test_the_k8s_executor_config_and_the_gpu_op_tags_validate_and_reach_the_step_job(monkeypatch):
    from dagster_k8s import DagsterK8sJobConfig, construct_dagster_k8s_job
    from dagster_k8s.container_context import K8sContainerContext
    from dagster_k8s.job import UserDefinedDagsterK8sConfig, get_user_defined_k8s_config

    from argus_dagster.assets.candidates import GPU_STEP_K8S_CONFIG
    from argus_dagster.resources import K8S_STEP_DEFAULTS

    job = _k8s_job(monkeypatch)
    assert job.executor_def.name == "k8s"
    # A run's execution config as an operator writes it: validated by the k8s executor's own schema.
    # (SHALLOW: the override's node_selector replaces the tag's; the default, DEEP, would add to it.)
    override = {"merge_behavior": "SHALLOW",
                "pod_spec_config": {"node_selector": {"cloud.google.com/gke-accelerator": "nvidia-l4"}}}
    run_config = {"execution": {"config": {"job_namespace": "argus", "env_secrets": ["argus-env"], "max_concurrent": 3,
                                           "per_step_k8s_config": {"criterion_evidence": override}}}}
    resolved = dg.validate_run_config(job, run_config)["execution"]["k8s"]
    # The run's values over the k8s resource set's defaults (resources.K8S_STEP_DEFAULTS).
    assert resolved["per_step_k8s_config"]["criterion_evidence"]["pod_spec_config"] == override["pod_spec_config"]
    assert resolved["max_concurrent"] == 3 and resolved["env_secrets"] == ["argus-env"]
    assert resolved["step_k8s_config"]["container_config"] == K8S_STEP_DEFAULTS["step_k8s_config"]["container_config"]
    defaults = dg.validate_run_config(job, {})["execution"]["k8s"]  # the defaults alone are a valid config
    assert defaults["max_concurrent"] == K8S_STEP_DEFAULTS["max_concurrent"] and defaults["per_step_k8s_config"] == {}
    with pytest.raises(dg.DagsterInvalidConfigError):
        dg.validate_run_config(job, {"execution": {"config": {"max_concurrent": "many"}}})
    with pytest.raises(dg.DagsterInvalidConfigError):
        dg.validate_run_config(job, {"execution": {"config": {"per_step_k8s_config": {"criterion_evidence": {"gpu": 1}}}}})

    # The evidence op carries the tag; no other op of the job does.
    ops = {node.name: node.definition for node in job.graph.nodes}
    tagged = sorted(name for name, op in ops.items() if "dagster-k8s/config" in op.tags)
    assert tagged == ["criterion_evidence"]
    from_tag = get_user_defined_k8s_config(ops["criterion_evidence"].tags)
    assert from_tag.container_config["resources"]["limits"]["nvidia.com/gpu"] == "1"

    def step_pod(op_tags: dict, per_step: dict | None = None):
        # The step handler's merge (dagster_k8s.executor.K8sStepHandler): the executor's step_k8s_config,
        # then the op's tag, then the run's per_step_k8s_config for that op.
        context = K8sContainerContext(run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(resolved["step_k8s_config"]))
        context = context.merge(K8sContainerContext(run_k8s_config=get_user_defined_k8s_config(op_tags)))
        context = context.merge(K8sContainerContext(run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(per_step or {})))
        config = DagsterK8sJobConfig(job_image="registry.example.com/argus-dagster:0.1.0", dagster_home="/opt/dagster/dagster_home")
        user = context.run_k8s_config
        return construct_dagster_k8s_job(config, ["dagster", "api", "execute_step"], "dagster-step-x",
                                         user_defined_k8s_config=user).spec.template.spec

    gpu = step_pod(ops["criterion_evidence"].tags)
    assert gpu.containers[0].resources.limits["nvidia.com/gpu"] == "1"
    assert gpu.node_selector == GPU_STEP_K8S_CONFIG["pod_spec_config"]["node_selector"]
    assert [(t.key, t.operator, t.effect) for t in gpu.tolerations] == [("nvidia.com/gpu", "Exists", "NoSchedule")]
    cpu = step_pod(ops["criterion_scores"].tags)
    assert "nvidia.com/gpu" not in (cpu.containers[0].resources.limits or {})
    assert cpu.containers[0].resources.requests == K8S_STEP_DEFAULTS["step_k8s_config"]["container_config"]["resources"]["requests"]
    assert not cpu.tolerations and not cpu.node_selector
    relabelled = step_pod(ops["criterion_evidence"].tags, resolved["per_step_k8s_config"]["criterion_evidence"])
    assert relabelled.node_selector == override["pod_spec_config"]["node_selector"]
    assert relabelled.containers[0].resources.limits["nvidia.com/gpu"] == "1"  # the tag's other keys stay
    assert [t.key for t in relabelled.tolerations] == ["nvidia.com/gpu"]
