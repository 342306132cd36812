#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for tests and trying the slurm profile:
# munged, slurmctld and slurmd on loopback, on free ports, with every file under STATE_DIR.
#
#   workflow/slurm/start_cluster.sh STATE_DIR     start it; prints the SLURM_CONF to export
#   workflow/slurm/start_cluster.sh STATE_DIR stop
#
# Needs Debian's slurmctld, slurmd, slurm-client and munge (`make test-slurm` installs them) and
# root (slurmd starts jobs as the submitting user). Everything lives in STATE_DIR (own munge key
# and socket, spool, logs) except one link: /etc/slurm/slurm.conf -> STATE_DIR/slurm.conf, because
# the Snakemake job step clears SLURM_* variables (SLURM_CONF too) before its nested `srun`, which
# then reads the default path, as on a real cluster. The script refuses to replace a real
# /etc/slurm/slurm.conf or the link of a cluster that is still running.
set -euo pipefail

die() { echo "start_cluster.sh: $*" >&2; exit 2; }

[[ $# -ge 1 ]] || die "usage: start_cluster.sh STATE_DIR [stop]"
STATE=$(mkdir -p "$1" && cd "$1" && pwd)
CONF="$STATE/slurm.conf"
SYSTEM_CONF=/etc/slurm/slurm.conf

stop() {
    # Only the daemons this script started, by the pids they recorded.
    for name in slurmd slurmctld munged; do
        if [[ -f "$STATE/$name.pid" ]]; then
            kill "$(cat "$STATE/$name.pid")" 2>/dev/null || true
            rm -f "$STATE/$name.pid"
        fi
    done
    if [[ "$(readlink "$SYSTEM_CONF" 2>/dev/null)" == "$CONF" ]]; then
        rm -f "$SYSTEM_CONF"
    fi
}

if [[ "${2:-}" == "stop" ]]; then
    stop
    exit 0
fi

for exe in munged slurmctld slurmd sbatch squeue sinfo; do
    command -v "$exe" >/dev/null || die "$exe not found: apt-get install slurmctld slurmd slurm-client munge"
done
[[ $(id -u) -eq 0 ]] || die "slurmd needs root (it runs jobs as their user)"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

stop  # a previous cluster in the same STATE_DIR
if [[ -L "$SYSTEM_CONF" ]]; then
    other=$(dirname "$(readlink "$SYSTEM_CONF")")
    if [[ -f "$other/slurmctld.pid" ]] && kill -0 "$(cat "$other/slurmctld.pid")" 2>/dev/null; then
        die "another test cluster runs from $other; stop it: $0 $other stop"
    fi
    rm -f "$SYSTEM_CONF"
elif [[ -e "$SYSTEM_CONF" ]]; then
    die "$SYSTEM_CONF exists (a real SLURM configuration): this script will not replace it"
fi
mkdir -p "$STATE/ctld" "$STATE/spool" "$STATE/munge" "$STATE/log"
chmod 700 "$STATE/munge"
if [[ ! -f "$STATE/munge/munge.key" ]]; then
    dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$STATE/munge/munge.key"
fi
SOCKET="$STATE/munge/munge.socket"
munged --force --key-file="$STATE/munge/munge.key" --socket="$SOCKET" \
    --pid-file="$STATE/munged.pid" --log-file="$STATE/log/munged.log" \
    --seed-file="$STATE/munge/munge.seed"

NODE=$(hostname -s)
CPUS=$(nproc)
MEM_MB=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
cat > "$CONF" <<CONF
# Written by workflow/slurm/start_cluster.sh: a one-node test cluster on loopback.
ClusterName=market-agents-test
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# Keep finished jobs visible to squeue long enough for Snakemake's status checks.
MinJobAge=3600
# A batch job is requeueable only when submitted with --requeue (the slurm profile's
# slurm-requeue), so the test shows that the profile, not this cluster, makes it so.
JobRequeue=0
# A job past its time limit is killed at once (the test times one out on purpose).
OverTimeLimit=0
KillWait=5
MpiDefault=none
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=test Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
CONF

mkdir -p "$(dirname "$SYSTEM_CONF")"
ln -s "$CONF" "$SYSTEM_CONF"
export SLURM_CONF="$CONF"
slurmctld
slurmd
for _ in $(seq 120); do
    if sinfo -h -o '%t' 2>/dev/null | grep -qx idle; then
        echo "export SLURM_CONF=$CONF"
        exit 0
    fi
    sleep 0.5
done
echo "start_cluster.sh: the node did not come up; logs in $STATE/log" >&2
tail -n 20 "$STATE"/log/*.log >&2 || true
stop
exit 1
