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
#      bench/results/<date>-<gpu>.md and .json, or into $OUT when it is set;
#   4. bench/plot_copy.py: the copy-bandwidth curves of the reports as <date>-<gpu>-copy.png
#      (each transport against its baselines and local CUDA, by size), where the machine's
#      python3 has matplotlib (else a note in the report).
#   5. The PyTorch benchmarks (bench/torch_bench.py), each local against remote in
#      alternating runs, client in the same GPU-less namespace, each writing its report:
#      RG_COMPILED_GPT2=1: issue 18's compiled GPT-2-small training (torch.compile of
#        examples/transformer/gpt2.py; every run compiles, Inductor's and Triton's caches
#        in a new folder per run; one remote run fills the server's --cubin-store first):
#        step time and time to the first compiled step, remote/local, and the losses
#        (<date>-<gpu>-compiled-gpt2.md). RG_GPT2_MODES (default, or
#        "default,reduce-overhead"), RG_GPT2_STEPS (30), RG_GPT2_ROUNDS (2),
#        RG_GPT2_BUDGET_S (100: later rounds only where they fit).
#      RG_MODEL_LOAD=1: issue 20's model load, a state dict of RG_MODEL_LOAD_GIB (4) GiB
#        of mixed sizes moved to the GPU (.to and load_state_dict), remote/local per
#        transport in RG_MODEL_LOAD_TRANSPORTS (tcp,shm) (<date>-<gpu>-model-load.md).
#        RG_MODEL_LOAD_ROUNDS (2), RG_MODEL_LOAD_BUDGET_S (50).
#      Each stops with a message naming what is missing (torch, triton, the build's
#      driver folder); a failed run makes run-gpu.sh exit 1 after the other steps.
#
# Environment: RG_BUILD (build folder, default build), RG_DEVICE (GPU, default 0),
# RG_COMMIT (commit to name when there is no .git, as on the device machine), RG_TLS=1
# (a second remote run over tls://, reported as <date>-<gpu>-tls.md: TLS's cost is the
# difference between the two reports, against the same local baselines), RG_SHM=1 (a
# remote run over shm://, a unix socket and rings in shared memory, reported as
# <date>-<gpu>-shm.md against the shm transport's own baselines, measured in the
# local run, and against local CUDA; its pinned copies go through shared regions,
# zero-copy, and the report's notes say how many did). RG_BOUNCE_SWEEP=1 (with
# RG_SHM=1): synchronous pageable shm copies of 16-256 MiB once per bounce setting in
# RG_BOUNCE_SETTINGS ("CHUNK:THREADS ...", REMOTE_GPU_BOUNCE_CHUNK and
# REMOTE_GPU_COPY_THREADS of frontend/src/host_bounce.c and par_copy.c; default
# "1M:1 1M:2 2M:1 2M:2 4M:2 8M:2 2M:4"), about 8 s each, into <date>-<gpu>-bounce-sweep.md
# against local pageable cudaMemcpy: the data that chooses the defaults.
# RG_STRIPE_SWEEP (default "0 2 8"; empty: none): after the main remote run (striped
# copies on, REMOTE_GPU_STRIPES's default), a copy-only remote run per stripe count
# (64 and 256 MiB, about 5 s each), tabled in the main report beside the target
# "TCP copies at 256 MiB >= 2x single stream". RG_ZEROCOPY_PROBE=0 skips the
# MSG_ZEROCOPY probe (bench/zerocopy.c, a few seconds; its result is a note).
# RG_AB_GPUD, RG_AB_LIB (another build's remote-gpud and libremote.so, say the
# commit before a change, named RG_AB_LABEL): after the main remote run,
# RG_AB_ROUNDS (2) remote runs of each build in alternation, the same remote-bench
# through each build's library against its own server; bench/ab.py writes
# <date>-<gpu>-ab.md (each run's figure, the medians, B/A). About 40 s a run.
# RG_REMOTE_BENCH=0 skips steps 1-4 (remote-bench is still needed: the namespace's check
# runs it). With $OUT set, the reports and the PNG go there and everything else (the
# JSON files, raw runs, server logs, the PyTorch runs' logs) into one bench-raw.tar.gz:
# the device tool brings back at most 8 files.
# Arguments are passed to both remote-bench runs (e.g. --min-time 0.1 --iters 5000).
# Takes under a minute when all works (local run about 15 s on an H200 machine); the
# steps' time limits (local 60 s, server start 20 s, remote 85 s, shutdown 5 s) keep the
# whole under 3 minutes. A run stopped by its limit leaves the sections it finished.
# The PyTorch benchmarks add their budgets (about 150 s together by default) and
# print the seconds they used.
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
rbench=${RG_REMOTE_BENCH:-1}

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
if [ "$rbench" = 1 ]; then
	echo "== run-gpu: local run (CUDA on GPU $dev, TCP loopback baselines)"
	timeout 60 "$bench" --only all --device "$dev" --json "$work/local.json" "$@" 2>&1 | tee "$work/local.txt"
	rc=${PIPESTATUS[0]}
	[ "$rc" = 0 ] || notes+=("local run exited with $rc$(limit_note "$rc")")
fi

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
			env REMOTE_GPU="$target" REMOTE_GPU_TLS_CA="$work/ca.pem" LD_PRELOAD="$lib" "${client_env[@]}" \
			"$bench" --only "$run_only" --device 0 --json "$work/$name.json" "${run_args[@]}" 2>&1 | tee "$work/$name.txt"
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
# what remote_run's client gets: extra environment, sections, arguments
client_env=() run_only=cuda run_args=("$@") sweep_reports=()
sweep=()
remote_json_remote= remote_json_tls= remote_json_shm=
ab_runs=() reports_ab=
[ -f "$lib" ] && lib=$(readlink -f "$lib")
if [ "$rbench" != 1 ]; then
	echo "== run-gpu: RG_REMOTE_BENCH=0: no remote-bench runs"
elif [ ! -x "$gpud" ] || [ ! -f "$lib" ]; then
	notes+=("remote run not made: $gpud or $lib missing")
elif ! command -v unshare >/dev/null; then
	notes+=("remote run not made: unshare missing")
else
	# --drain-seconds 0: SIGTERM at the end ends the (finished) sessions at once
	remote_run remote tcp --drain-seconds 0
	# RG_AB_GPUD and RG_AB_LIB: another build's server and client library (the
	# "before" of a change, RG_AB_LABEL), RG_AB_ROUNDS (2) runs of each in
	# alternation with this build's, the same remote-bench; bench/ab.py tables them
	ab_runs=()
	if [ -n "${RG_AB_GPUD:-}" ]; then
		gpud_b=$gpud lib_b=$lib
		for r in $(seq "${RG_AB_ROUNDS:-2}"); do
			gpud=$RG_AB_GPUD lib=$(readlink -f "${RG_AB_LIB:-}")
			remote_run "ab-a$r" tcp --drain-seconds 0
			gpud=$gpud_b lib=$lib_b
			remote_run "ab-b$r" tcp --drain-seconds 0
			[ -s "$work/ab-a$r.json" ] && ab_runs+=(--a "$work/ab-a$r.json")
			[ -s "$work/ab-b$r.json" ] && ab_runs+=(--b "$work/ab-b$r.json")
		done
	fi
	# The stripe sweep (issue 20 item 2): copies of 64 and 256 MiB over tcp with
	# REMOTE_GPU_STRIPES of each count in RG_STRIPE_SWEEP (0: one connection, the
	# main run has the default), reported beside the main run's copies; a note
	# per run counts the copies whose bytes went through pageable memory on the
	# server (its sessions' end lines): striped runs a few per session (before
	# its pinned staging grew), not one per other large H2D copy
	for n in ${RG_STRIPE_SWEEP-0 2 8}; do
		client_env=("REMOTE_GPU_STRIPES=$n") run_only=copy run_args=(--min-size 64M --max-size 256M)
		gpud_log=warn,backend=info remote_run "stripes$n" tcp --drain-seconds 0
		[ -s "$work/stripes$n.json" ] && sweep_reports+=(--stripes "$n=$work/stripes$n.json")
		pg=$(grep -o '[0-9]* copies through pageable memory' "$work/gpud-stripes$n.log" | awk '{s += $1} END {print s + 0}')
		notes+=("stripes $n (64-256 MiB copies): $pg copies through pageable memory on the server")
	done
	client_env=() run_only=cuda run_args=("${bench_args[@]}")
	# Whether MSG_ZEROCOPY would pay for the stripes' sends on this host's
	# loopback (bench/zerocopy.c; transport/README.md "Bulk copies")
	if [ "${RG_ZEROCOPY_PROBE:-1}" = 1 ] && gcc -O2 -pthread -o "$work/zerocopy" "$root/bench/zerocopy.c" 2>/dev/null; then
		zc=$(timeout 30 "$work/zerocopy" 16 2048 | tail -n 1)
		echo "run-gpu: $zc"
		notes+=("loopback, one stream, sends of 16 MiB (bench/zerocopy.c): ${zc#chunk 16 MiB: }")
	fi
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
		if [ "${RG_BOUNCE_SWEEP:-0}" = 1 ]; then
			run_args=(--min-size 16M --max-size 256M --iters 200 --launches 1000 --launch-reps 1 --min-time 0.1)
			for set in ${RG_BOUNCE_SETTINGS:-1M:1 1M:2 2M:1 2M:2 4M:2 8M:2 2M:4}; do
				name=bounce-${set/:/-t}
				client_env=(REMOTE_GPU_BOUNCE_CHUNK="$(numfmt --from=iec "${set%%:*}")" REMOTE_GPU_COPY_THREADS="${set##*:}")
				remote_run "$name" shm --drain-seconds 0
				[ -s "$work/$name.json" ] && sweep+=("$set=$work/$name.json")
			done
			client_env=() run_args=("${bench_args[@]}")
		fi
	fi
fi
remote_json=$remote_json_remote

# ---- 3. report ----
outdir=${OUT:-$root/bench/results}
mkdir -p "$outdir"
# with $OUT: the JSON files go into the archive of raw files (at most 8 files come back)
jsondir=$outdir
[ -n "${OUT:-}" ] && jsondir=$work
reports=()
if [ "$rbench" = 1 ]; then
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
		${remote_json:+--remote "$remote_json"} ${remote_json:+--stripes "default=$remote_json"} \
		"${sweep_reports[@]}" --md "$outdir/$date-$slug.md" --json "$jsondir/$date-$slug.json" >/dev/null || exit 1
	reports+=("$outdir/$date-$slug.md")
	if [ ${#ab_runs[@]} -gt 0 ]; then
		python3 "$root/bench/ab.py" --label-a "${RG_AB_LABEL:-A}" --label-b "${commit:0:12}" "${ab_runs[@]}" \
			--meta "$work/meta.json" --md "$outdir/$date-$slug-ab.md" && reports_ab="$outdir/$date-$slug-ab.md"
	fi
	if [ -n "$remote_json_tls" ]; then
		python3 "$root/bench/report.py" --meta "$work/meta.json" --local "$work/local.json" --remote "$remote_json_tls" \
			--md "$outdir/$date-$slug-tls.md" --json "$jsondir/$date-$slug-tls.json" >/dev/null || exit 1
		reports+=("$outdir/$date-$slug-tls.md")
	fi
	if [ -n "$remote_json_shm" ]; then
		python3 "$root/bench/report.py" --meta "$work/meta.json" --local "$work/local.json" --remote "$remote_json_shm" \
			--transport shm --md "$outdir/$date-$slug-shm.md" --json "$jsondir/$date-$slug-shm.json" >/dev/null || exit 1
		reports+=("$outdir/$date-$slug-shm.md")
	fi
fi

# the bounce sweep: GB/s of each setting by copy, against local pageable cudaMemcpy
if [ ${#sweep[@]} -gt 0 ]; then
	python3 "$root/bench/bounce_sweep.py" "$work/local.json" "$outdir/$date-$slug-bounce-sweep.md" "$commit" \
		"${sweep[@]}" || echo "run-gpu: bench/bounce_sweep.py failed" >&2
fi

# ---- 4. the copy-bandwidth curves, beside the reports ----
if [ ${#reports[@]} -gt 0 ]; then
	png=$date-$slug-copy.png
	python3 "$root/bench/plot_copy.py" -o "$outdir/$png" "${reports[@]}" >"$work/plot.txt" 2>&1
	case $? in
	0) line="Copy-bandwidth curves (every report of this run): \`$png\`" ;;
	3) line="Copy-bandwidth curves not drawn: python3 on this machine has no matplotlib" ;;
	*) line="Copy-bandwidth curves not drawn: bench/plot_copy.py failed: $(tail -n 1 "$work/plot.txt")" ;;
	esac
	echo "run-gpu: $line"
	printf '\n## Copy curves\n\n%s\n' "$line" >>"$outdir/$date-$slug.md"
fi

# ---- 5. the PyTorch benchmarks ----
torch_failed=()
# torch_bench WHAT NAME BUDGET ARGS...: bench/torch_bench.py, its report $outdir/$date-$slug-NAME.md
torch_bench() {
	local what=$1 name=$2 budget=$3 rc
	shift 3
	echo "== run-gpu: PyTorch benchmark $what (budget $budget s)"
	if [ ! -x "$gpud" ] || [ ! -f "$lib" ] || ! command -v unshare >/dev/null; then
		echo "run-gpu: FAILED: $what needs $gpud, $lib and unshare" >&2
		torch_failed+=("$what (missing $gpud, $lib or unshare)")
		return
	fi
	# the limit: the budget, the last round's overrun, the state dict's making, the report
	timeout $((budget + 240)) python3 "$root/bench/torch_bench.py" "$what" --gpud "$gpud" --lib "$lib" \
		--wrap "unshare -m bash $root/bench/run-gpu.sh --gpu-less $bench" --gpu "$dev" --budget "$budget" \
		--work "$work/torch-$what" --md "$outdir/$date-$slug-$name.md" --commit "$commit" "$@" 2>&1 |
		tee "$work/torch-$what.txt"
	rc=${PIPESTATUS[0]}
	[ "$rc" = 0 ] || torch_failed+=("$what (exit $rc$(limit_note "$rc"); $work/torch-$what.txt)")
}
if [ "${RG_COMPILED_GPT2:-0}" = 1 ]; then
	torch_bench gpt2 compiled-gpt2 "${RG_GPT2_BUDGET_S:-100}" --modes "${RG_GPT2_MODES:-default}" \
		--steps "${RG_GPT2_STEPS:-30}" --rounds "${RG_GPT2_ROUNDS:-2}"
fi
if [ "${RG_MODEL_LOAD:-0}" = 1 ]; then
	torch_bench load model-load "${RG_MODEL_LOAD_BUDGET_S:-50}" --gib "${RG_MODEL_LOAD_GIB:-4}" \
		--transports "${RG_MODEL_LOAD_TRANSPORTS:-tcp,shm}" --rounds "${RG_MODEL_LOAD_ROUNDS:-2}"
fi

# ---- the raw files: one archive with $OUT ----
if [ -n "${OUT:-}" ]; then
	(cd "$work" && { find . -maxdepth 1 -type f \( -name '*.txt' -o -name '*.log' -o -name '*.json' \)
		find . -mindepth 2 -maxdepth 2 -path './torch-*' -type f \( -name '*.log' -o -name '*.json' \) -size -20M; } |
		sed 's|^\./||' | tar czf "$OUT/bench-raw.tar.gz" -T -) ||
		echo "run-gpu: could not write $OUT/bench-raw.tar.gz" >&2
fi
echo
for f in "${reports[@]}"; do
	cat "$f"
	echo
done
[ -n "$reports_ab" ] && cat "$reports_ab"
echo "run-gpu: wrote ${reports[*]:-no remote-bench report}$([ -n "${OUT:-}" ] && echo " and $OUT/bench-raw.tar.gz") in $(($(date +%s) - start)) s (raw runs in $work)"
if [ ${#torch_failed[@]} -gt 0 ]; then
	printf 'run-gpu: FAILED: PyTorch benchmark %s\n' "${torch_failed[@]}" >&2
	exit 1
fi
