/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The D-Bus API of cgprofd, shared by the agent (manager-bus.c) and
 * cgprofctl. Served on the private socket (/run/cgprof/bus, mode 0600, root
 * only; --bus-socket) and, when a system bus is reachable, as the well-known
 * name io.cgprof.Agent1 on it (systemd/io.cgprof.Agent1.conf allows only root).
 *
 * Object /io/cgprof/Agent1, interface io.cgprof.Agent1 (introspectable). The
 * private socket is peer-to-peer; it also answers org.freedesktop.DBus.Hello,
 * AddMatch and RemoveMatch, so that bus clients (busctl --address=unix:path=...)
 * work on it; every signal reaches every connection.
 *
 * Properties (read-only):
 *   Version s, Node s, UptimeUSec t, ActiveSessions u (running sessions; armed ones not counted),
 *   ConfigPath s, LastConfigLoad s   ("ok", or the error of the last (re)load),
 *   MachineConfig a(sss)            (sysctl name, wanted value, current value): the machineConfig entries
 *                                   that apply on this node (its labels select them)
 *   Targets a(sssb)                 (as ListTargets())
 *
 * Methods:
 *   GetStatus() -> s status_json
 *   ListTargets() -> a(sssb) (name, profile, kind, disabled)
 *        kind: "pod" (pod rules), "cgroup" (cgroupPatterns only), "pod+cgroup", "default" (enableDefault)
 *        in config order, then always one "enableDefault" entry (defaultProfileRef; disabled when
 *        enableDefault is off).
 *   ListSessions() -> a(ssssssssttt)
 *        (id, state "running"|"armed", target, profile, namespace, pod, container, cgroup,
 *         start_usec (CLOCK_REALTIME, 0 when armed), duration_usec (0: until stopped), samples)
 *        namespace/pod/container are "" for host cgroups. target is "on-demand" for a session started
 *        by StartSession on a container/cgroup no rule selects.
 *   Check(s namespace, s pod, s container) -> (b targeted, s target, s profile, a(ss) reasons)
 *        container "" means any/all of the pod's containers (the first one decides);
 *        reasons: for every target that does not select it, (target name, the failed condition), config
 *        order, then ("enableDefault", why not) unless it is the one that selects it; the decision is the
 *        agent's own: pod rules and enableDefault, else host rules (cgroupPatterns only) on the container's
 *        cgroup. NotFound when the pod is not on this node (or Kubernetes is off), or has no such container.
 *   CheckMachineConfig() -> (s node, s labels, s labels_source, a(ssssss) sysctls)
 *        labels: the labels machineConfig entries are selected by ("a=b,c=d"); labels_source: "node",
 *        "node (deleted: its last known labels)", "nodeLabels" (a host), or "none (...)" (the Node not read
 *        yet: only entries without nodeSelector apply). sysctls: (name, desired value, entry
 *        "machineConfig[N]", its nodeSelector, actual value, state) for every sysctl an entry names, then
 *        those changed earlier that none names any more; desired/entry/nodeSelector "" when no entry wants
 *        it on this node; state "applied", "drifted" (repaired at the next check), "refused" (could not be
 *        set), "restored" (no longer wanted: its original written back), "not selected" (untouched),
 *        "waiting for the node's labels".
 *   StartSession(s target, s profile, t duration_usec) -> s session_id
 *        target: "pod:NAMESPACE/POD" or "pod:NAMESPACE/POD/CONTAINER" (the pod's first running container
 *        when none is given) or "cgroup:PATH" (PATH relative to the cgroup v2 root); any container or cgroup
 *        on the node, targeted by a rule or not; starts an armed (manual) session of that container/cgroup
 *        if there is one. profile "": the target's profile or defaultProfileRef. duration_usec 0: the
 *        profile's duration. Errors: NotFound (no such pod/container/cgroup), AlreadyRunning (a session runs
 *        for it), InvalidArgument (bad target syntax, unknown profile).
 *        A session started this way runs until its duration, StopSession, or its cgroup goes away (rule
 *        changes do not end it). A profile other than the armed session's replaces the armed session.
 *   StopSession(s id) -> s report_dir     ("" when the session wrote no report, e.g. an armed one; one
 *        directory per process, space-separated, for a per-process output template); NotFound; Failed
 *        when the report could not be written (the session is ended anyway).
 *   StopAllSessions() -> as report_dirs   (ends every running session, armed ones stay armed; one entry
 *        per session ended, "" when it wrote no report)
 *   ListReports(s filter, t since_usec) -> a(sssssstt)
 *        (session, report_dir, namespace, pod, container, cgroup, start_usec, samples)
 *        from the summary.json files under reportDir, newest first; filter "" or "NAMESPACE" or
 *        "NAMESPACE/POD" or "cgroup:PATH" (that cgroup exactly); since_usec: sessions that started at or
 *        after it. The walk is bounded: 10000 directories, 8 levels, no symlink followed.
 *   Reload() -> ()                        (as SIGHUP; Failed with the error when the config is invalid)
 *
 * Signals:
 *   SessionStarted(s id, s target, s profile, s namespace, s pod, s container, s cgroup)
 *        when a session starts sampling (a container's provisional session: when its container is known)
 *   SessionEnded(s id, s reason, s report_dir, t samples)
 *        when a session that sampled ends (not for armed or discarded ones); report_dir as StopSession's
 *
 * Errors (names): */
#define CGPROF_BUS_PATH "/io/cgprof/Agent1"
#define CGPROF_BUS_INTERFACE "io.cgprof.Agent1"
#define CGPROF_BUS_NAME "io.cgprof.Agent1"
#define CGPROF_ERROR_NOT_FOUND "io.cgprof.Error.NotFound"
#define CGPROF_ERROR_ALREADY_RUNNING "io.cgprof.Error.AlreadyRunning"
#define CGPROF_ERROR_INVALID_ARGUMENT "io.cgprof.Error.InvalidArgument"
#define CGPROF_ERROR_FAILED "io.cgprof.Error.Failed"
