"""The recorded environment of a run (command, date, machine, versions), in words for titles and the report."""
import shlex


def _topology(data):
    topo = data.get("topology")
    return topo if isinstance(topo, dict) else {}


def gpus(data):
    """'2 x NVIDIA H200' (grouped by name), or None without GPUs."""
    listed = _topology(data).get("gpus") or []
    counts = {}
    for gpu in listed:
        name = gpu.get("name", "GPU") if isinstance(gpu, dict) else "GPU"
        counts[name] = counts.get(name, 0) + 1
    if not counts:
        return None
    return " + ".join("%d x %s" % (n, name) for name, n in counts.items())


# PICKLE_* variables that say how a run was kept, not what it measured: left out of the settings named with a run.
_BOOKKEEPING = {"PICKLE_TIMEOUT", "PICKLE_TOKEN", "PICKLE_SOURCE_REVISION", "PICKLE_LOG", "PICKLE_LOG_SUBSYS",
                "PICKLE_PYTHON", "PICKLE_BENCH_CHECK_THREADS"}
# At most this many settings in a title; the rest are counted ("and 2 more"), and the report lists them all.
_SETTINGS_SHOWN = 3


def settings(data):
    """The pickle settings the run was made with ('PICKLE_IPC_STREAMS=2', ...): runs of one command under different
    settings must not look alike in a plot title or a heading."""
    env = data.get("environment") or {}
    if not isinstance(env, dict):
        return []
    return ["%s=%s" % (name, env[name]) for name in sorted(env)
            if name.startswith("PICKLE_") and name not in _BOOKKEEPING]


def short(data):
    """The run for a plot title or a heading: GPUs (or the CPU when there are none), host memory when that was
    measured, and the pickle settings it was made with."""
    host = _topology(data).get("host") or {}
    text = gpus(data) or "%s (no GPU)" % (host.get("cpu_model") or host.get("hostname") or "unknown host")
    memory = (data.get("options") or {}).get("memory")
    if memory == "host":
        text += ", host memory"
    chosen = settings(data)
    if chosen:
        text += ", " + ", ".join(chosen[:_SETTINGS_SHOWN])
        if len(chosen) > _SETTINGS_SHOWN:
            text += " and %d more" % (len(chosen) - _SETTINGS_SHOWN)
    return text


def _links(data):
    links = _topology(data).get("links") or []
    seen = []
    for link in links:
        if not isinstance(link, dict):
            continue
        text = "GPU%s-GPU%s %s" % (link.get("from"), link.get("to"), link.get("label") or link.get("type"))
        if link.get("type") and link.get("label") and link.get("type") != link.get("label"):
            text += " (%s)" % link["type"]
        seen.append(text)
    return seen


def machine_line(data):
    """GPUs and links, then the host: for the report's 'Machine' line."""
    topo = _topology(data)
    host = topo.get("host") or {}
    parts = []
    if gpus(data):
        parts.append(gpus(data))
        links = _links(data)
        if links:
            parts.append("links " + ", ".join(links))
    else:
        parts.append("no GPU" + (": %s" % topo["no_gpu_reason"] if topo.get("no_gpu_reason") else ""))
    cpu = host.get("cpu_model")
    if cpu:
        parts.append("%s, %s logical cores" % (cpu, host.get("logical_cores", "?")))
    if host.get("memory_bytes"):
        parts.append("%.0f GiB memory" % (host["memory_bytes"] / float(1 << 30)))
    if host.get("hostname"):
        parts.append("host `%s`" % host["hostname"])
    if host.get("kernel"):
        parts.append(host["kernel"])
    return "; ".join(parts) if parts else "not recorded"


def _library(entry):
    if not isinstance(entry, dict):
        return str(entry) if entry else "not recorded"
    if not entry.get("found"):
        return "not found" + (" (%s)" % entry["detail"] if entry.get("detail") else "")
    return entry.get("version") or "found"


def versions_line(data):
    """driver, CUDA, NCCL, libfabric, pickle: for the report's 'Versions' line."""
    versions = _topology(data).get("versions") or {}
    if not versions:
        return "not recorded"
    cuda = versions.get("cuda_runtime")
    if versions.get("cuda_driver") and versions.get("cuda_driver") != cuda:
        cuda = "%s runtime, %s driver API" % (cuda, versions["cuda_driver"])
    parts = [
        "driver %s" % (versions.get("driver") or "none"),
        "CUDA %s" % (cuda or "none"),
        "NCCL %s" % _library(versions.get("nccl")),
        "libfabric %s" % _library(versions.get("libfabric")),
        "pickle %s" % (versions.get("pickle") or "?"),
    ]
    return ", ".join(parts)


def command_line(data):
    command = data.get("command")
    if isinstance(command, list) and command:
        return " ".join(shlex.quote(str(word)) for word in command)
    return "not recorded"


def date(data):
    return data.get("started_utc") or "not recorded"


def environment_line(data):
    env = data.get("environment") or {}
    if not env:
        return "none of PICKLE_*, NCCL_*, CUDA_* set"
    return ", ".join("`%s=%s`" % (k, env[k]) for k in sorted(env))
