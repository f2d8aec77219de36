#!/usr/bin/env bash
# bench/run-gpu.sh: the benchmark run of record, on the GPU machine, after the project
# is built in build/ (see bench/README.md).
#
#   1. remote-bench locally: local CUDA (launch rate and copy baselines) and the raw TCP
#      loopback baselines (ping-pong, stream);
#   2. remote-gpud on the GPU, and remote-bench --only cuda through libremote.so in a
#      mount namespace where the driver libraries and /dev/nvidia* are /dev/null, so the
#      client is truly GPU-less (DESIGN.md, Testing);
#   3. bench/report.py: the ratios against the targets, written as
#      bench/results/<date>-<gpu>.md and .json, or into $OUT when it is set.
#
# Environment: RG_BUILD (build folder, default build), RG_DEVICE (GPU, default 0),
# RG_COMMIT (commit to name when there is no .git, as on the device machine), RG_TLS=1
# (a second remote run over tls://, reported as <date>-<gpu>-tls.md: TLS's cost is the
# difference between the two reports, against the same local baselines), RG_SHM=1 (a
# remote run over shm://, a unix socket and rings in shared memory, reported as
# <date>-<gpu>-shm.md against the shm transport's own baselines, measured in the
# local run, and against local CUDA; its pinned copies go through shared regions,
# zero-copy, and the report's notes say how many did).
# Arguments are passed to both remote-bench runs (e.g. --min-time 0.1 --iters 5000).
# Takes under a minute when all works (local run about 15 s on an H200 machine); the
# steps' time limits (local 60 s, server start 20 s, remote 85 s, shutdown 5 s) keep the
# whole under 3 minutes. A run stopped by its limit leaves the sections it finished.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)

# ---- inner mode: run "$@" with the GPU hidden (called through unshare -m) ----------
hide_gpu() {
	local f n=0
	mount --make-rprivate / 2>/dev/null || true
	# every driver library the dynamic linker or a dlopen could reach, resolved to the
	# real file (a bind mount over a symlink lands on its target anyway)
	while read -r f; do
		[ -f "$f" ] || continue
		mount --bind /dev/null "$f" && n=$((n + 1))
	done < <({
		ldconfig -p 2>/dev/null | awk '/lib(cuda|nvidia-ml)\.so/ {print $NF}'
		find /usr /lib /lib64 /opt /etc \( -name 'libcuda.so*' -o -name 'libnvidia-ml.so*' \) \
			\( -type f -o -type l \) 2>/dev/null
	} | xargs -r readlink -f | sort -u)
	for f in /dev/nvidia*; do
		if [ -c "$f" ]; then
			mount --bind /dev/null "$f" && n=$((n + 1))
		elif [ -d "$f" ]; then
			mount -t tmpfs none "$f" && n=$((n + 1))
		fi
	done
	echo "run-gpu: GPU hidden: $n mounts over libcuda.so*, libnvidia-ml.so*, /dev/nvidia*"
}

if [ "${1:-}" = --gpu-less ]; then
	shift
	bench=$1
	shift
	hide_gpu
	# proof: without LD_PRELOAD the same binary must find no GPU here
	if env -u LD_PRELOAD "$bench" --only cuda --iters 1 --launches 1 --launch-reps 1 \
		--min-time 0.001 --max-size 4K >/tmp/run-gpu-check.$$ 2>&1; then
		echo "run-gpu: the GPU is still visible in the namespace; remote run skipped" >&2
		cat /tmp/run-gpu-check.$$ >&2
		rm -f /tmp/run-gpu-check.$$
		exit 3
	fi
	echo "run-gpu: without LD_PRELOAD: $(grep -m1 'error:' /tmp/run-gpu-check.$$ | sed 's/^ *//')"
	rm -f /tmp/run-gpu-check.$$
	exec "$@"
fi

# ---- outer mode -----------------------------------------------------------------------
cd "$root" || exit 1
build=${RG_BUILD:-build}
dev=${RG_DEVICE:-0}
bench=$build/bench/remote-bench
gpud=$build/backend/remote-gpud
lib=$build/frontend/libremote.so
[ -x "$bench" ] || { echo "run-gpu: $bench missing: build the project first (cmake -S . -B $build && cmake --build $build)" >&2; exit 1; }
bench=$(readlink -f "$bench")

work=$(mktemp -d /tmp/rg-bench.XXXXXX)
gpud_pid=
cleanup() {
	if [ -n "$gpud_pid" ] && kill -0 "$gpud_pid" 2>/dev/null; then
		kill -KILL "$gpud_pid" 2>/dev/null
	fi
}
trap cleanup EXIT
notes=()
limit_note() { [ "$1" = 124 ] && echo " (its time limit: results partial)"; }
start=$(date +%s)

# ---- machine ----
gpus=$(nvidia-smi -L 2>/dev/null || echo "nvidia-smi failed")
gpu_name=$(nvidia-smi -i "$dev" --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
driver=$(nvidia-smi -i "$dev" --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
commit=${RG_COMMIT:-}
if [ -z "$commit" ] && git -C "$root" rev-parse HEAD >/dev/null 2>&1; then
	commit=$(git -C "$root" rev-parse HEAD)
	[ -z "$(git -C "$root" status --porcelain 2>/dev/null)" ] || commit="$commit (with uncommitted changes)"
fi
[ -n "$commit" ] || { commit=unknown; notes+=("no .git and no RG_COMMIT: commit unknown"); }
date=$(date -u +%Y-%m-%d)
slug=$(echo "${gpu_name:-unknown-gpu}" | tr '[:upper:]' '[:lower:]' | sed 's/[^a-z0-9]\+/-/g; s/^-//; s/-$//')

# ---- 1. local: CUDA on this GPU, TCP baselines ----
echo "== run-gpu: local run (CUDA on GPU $dev, TCP loopback baselines)"
timeout 60 "$bench" --only all --device "$dev" --json "$work/local.json" "$@" 2>&1 | tee "$work/local.txt"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || notes+=("local run exited with $rc$(limit_note "$rc")")

# ---- 2. remote: remote-gpud on the GPU, GPU-less client through libremote.so ----
# remote_run NAME SCHEME [SERVER ARGS...]: a remote-bench run through libremote.so,
# into $work/NAME.json and NAME.txt; sets remote_json_NAME when it produced one.
remote_run() {
	local name=$1 scheme=$2 host=127.0.0.1 listen=127.0.0.1:0 target
	shift 2
	[ "$scheme" = tls ] && host=localhost # the name the certificate holds
	# shm: a socket in the run's own folder (0700), which the namespace still sees
	[ "$scheme" = shm ] && listen=shm://$work/gpud.sock
	echo "== run-gpu: remote run $name (remote-gpud --device $dev $*, client GPU-less with libremote.so)"
	rm -f "$work/port"
	REMOTE_GPU_LOG=${gpud_log:-warn} "$gpud" --listen "$listen" --port-file "$work/port" --device "$dev" "$@" \
		>"$work/gpud-$name.log" 2>&1 &
	gpud_pid=$!
	for _ in $(seq 200); do
		[ -s "$work/port" ] && break
		kill -0 "$gpud_pid" 2>/dev/null || break
		sleep 0.1
	done
	port=$(cat "$work/port" 2>/dev/null)
	if [ -z "$port" ]; then
		notes+=("remote-gpud ($name) did not write its port (log: $(tail -3 "$work/gpud-$name.log" | tr '\n' ' '))")
	else
		target=$scheme://$host:$port
		[ "$scheme" = shm ] && target=$listen
		timeout 85 unshare -m bash "$root/bench/run-gpu.sh" --gpu-less "$bench" \
			env REMOTE_GPU="$target" REMOTE_GPU_TLS_CA="$work/ca.pem" LD_PRELOAD="$lib" \
			"$bench" --only cuda --device 0 --json "$work/$name.json" "${bench_args[@]}" 2>&1 | tee "$work/$name.txt"
		rc=${PIPESTATUS[0]}
		[ "$rc" = 0 ] || notes+=("remote run $name exited with $rc$(limit_note "$rc")")
		[ -s "$work/$name.json" ] && eval "remote_json_$name=\$work/\$name.json"
	fi
	if kill -0 "$gpud_pid" 2>/dev/null; then
		kill -TERM "$gpud_pid"
		for _ in $(seq 50); do kill -0 "$gpud_pid" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "$gpud_pid" 2>/dev/null; then
			notes+=("remote-gpud ($name) still running 5 s after SIGTERM: killed")
			kill -KILL "$gpud_pid"
		fi
	fi
	wait "$gpud_pid"
	rc=$?
	gpud_pid=
	[ "$rc" = 0 ] || notes+=("remote-gpud ($name) exited with $rc after SIGTERM (expected 0)")
}

bench_args=("$@")
remote_json_remote= remote_json_tls= remote_json_shm=
if [ ! -x "$gpud" ] || [ ! -f "$lib" ]; then
	notes+=("remote run not made: $gpud or $lib missing")
elif ! command -v unshare >/dev/null; then
	notes+=("remote run not made: unshare missing")
else
	lib=$(readlink -f "$lib")
	# --drain-seconds 0: SIGTERM at the end ends the (finished) sessions at once
	remote_run remote tcp --drain-seconds 0
	# RG_TLS=1: the same over tls:// (a throwaway CA and certificate for localhost)
	if [ "${RG_TLS:-0}" = 1 ]; then
		if openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=rg-ca \
			-keyout "$work/ca.key" -out "$work/ca.pem" >/dev/null 2>&1 &&
			openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
				-keyout "$work/srv.key" -out "$work/srv.csr" >/dev/null 2>&1 &&
			openssl x509 -req -in "$work/srv.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial \
				-days 1 -extfile <(printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n') \
				-out "$work/srv.pem" >/dev/null 2>&1; then
			gpud_log=warn,transport=info remote_run tls tls --drain-seconds 0 --tls-cert "$work/srv.pem" --tls-key "$work/srv.key"
			grep -h "kernel TLS" "$work/gpud-tls.log" | tail -n 1 | sed 's/^/run-gpu: /'
		else
			notes+=("tls run not made: openssl could not make a certificate")
		fi
	fi
	# RG_SHM=1: the same over shm:// (the client on the server's host); its
	# pinned copies must have gone through shared regions (zero-copy): the
	# session's last line says how many copies and bytes did
	if [ "${RG_SHM:-0}" = 1 ]; then
		gpud_log=warn,backend=info remote_run shm shm --drain-seconds 0
		zc=$(grep -h "shared regions:" "$work/gpud-shm.log" | tail -n 1 | sed 's/.*shared regions: //')
		echo "run-gpu: shm zero-copy: ${zc:-no shared regions (pinned copies went through the rings)}"
		notes+=("shm run, pinned memory in shared regions: ${zc:-none (pinned copies went through the rings)}")
	fi
fi
remote_json=$remote_json_remote

# ---- 3. report ----
outdir=${OUT:-$root/bench/results}
mkdir -p "$outdir"
META_DATE=$date META_GPU_NAME=$gpu_name META_GPUS=$gpus META_DRIVER=$driver \
META_CPU="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" \
META_CPUS=$(nproc) META_KERNEL=$(uname -r) META_COMMIT=$commit \
META_COMMAND="bench/run-gpu.sh${*:+ $*}" META_NOTES="$(printf '%s\n' "${notes[@]}")" \
META_SECONDS=$(($(date +%s) - start)) \
python3 - "$work/meta.json" <<'EOF'
import json, os, sys
m = {k[5:].lower(): v for k, v in os.environ.items() if k.startswith("META_")}
m["gpus"] = [l for l in m.get("gpus", "").splitlines() if l]
m["notes"] = [l for l in m.get("notes", "").splitlines() if l]
json.dump(m, open(sys.argv[1], "w"), indent=1)
EOF
python3 "$root/bench/report.py" --meta "$work/meta.json" --local "$work/local.json" \
	${remote_json:+--remote "$remote_json"} \
	--md "$outdir/$date-$slug.md" --json "$outdir/$date-$slug.json" >/dev/null || exit 1
if [ -n "$remote_json_tls" ]; then
	python3 "$root/bench/report.py" --meta "$work/meta.json" --local "$work/local.json" --remote "$remote_json_tls" \
		--md "$outdir/$date-$slug-tls.md" --json "$outdir/$date-$slug-tls.json" >/dev/null || exit 1
fi
if [ -n "$remote_json_shm" ]; then
	python3 "$root/bench/report.py" --meta "$work/meta.json" --local "$work/local.json" --remote "$remote_json_shm" \
		--transport shm --md "$outdir/$date-$slug-shm.md" --json "$outdir/$date-$slug-shm.json" >/dev/null || exit 1
fi
if [ -n "${OUT:-}" ]; then
	for f in local.txt remote.txt tls.txt shm.txt gpud-remote.log gpud-tls.log gpud-shm.log; do [ -f "$work/$f" ] && cp "$work/$f" "$OUT/"; done
fi
echo
cat "$outdir/$date-$slug.md"
echo
[ -n "$remote_json_shm" ] && { echo; cat "$outdir/$date-$slug-shm.md"; echo; }
echo "run-gpu: wrote $outdir/$date-$slug.md and .json in $(($(date +%s) - start)) s (raw runs in $work)"
