#!/usr/bin/env bash
# The command-line conventions of every tool (common/rg_opt.h): --opt VALUE
# and --opt=VALUE, one wording for usage errors, exit status 2, --help naming
# every option, --version; and remote-gpud --config FILE (settings from a
# file, the command line overriding them, token only through token-file).
#   cmdline.sh BUILD_DIR FAKE_LIBCUDA
set -u
b=$1 fake=$2
gpud=$b/backend/remote-gpud smi=$b/backend/remote-smi cubin=$b/cubin-tools/remote-cubin
bench=$b/bench/remote-bench rg=$b/launcher/remote-gpu
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
check_scratch cmdline

for t in "remote-gpud:$gpud" "remote-smi:$smi" "remote-cubin:$cubin" "remote-bench:$bench" "remote-gpu:$rg"; do
	tn=${t%%:*} tp=${t#*:}
	check "$tn.version" 0 "^$tn [0-9]+\.[0-9]+\.[0-9]+" -- "$tp" --version
	check "$tn.help" 0 '--help' -- "$tp" --help
done
check gpud.unknown 2 "^remote-gpud: unknown option '--bogus'$" "^Try 'remote-gpud --help'.$" -- "$gpud" --bogus x
check gpud.novalue 2 "^remote-gpud: option '--listen' needs a value" -- "$gpud" --listen
check gpud.unknown_eq 2 "^remote-gpud: unknown option '--bogus'$" -- "$gpud" --bogus=1
check gpud.novalue_eq 2 "^remote-gpud: option '--listen' needs a value$" -- "$gpud" --device 0 --listen
check gpud.badnum 2 "^remote-gpud: option '--hello-timeout' takes a number from 0 to 86400, not 'x'$" \
	-- "$gpud" --hello-timeout=x
check gpud.badport 2 "^remote-gpud: option '--metrics-port' takes a number from 0 to 65535, not '70000'$" \
	-- "$gpud" --metrics-port 70000
check gpud.isolation 2 "^remote-gpud: option '--isolation' takes process or thread, not 'fork'$" \
	-- "$gpud" --isolation=fork
check gpud.extra 2 "^remote-gpud: unexpected argument 'x'$" -- "$gpud" x
check gpud.quota 2 "^remote-gpud: option '--store-quota' takes a size" -- "$gpud" --store-quota 1Q
check gpud.help_all 0 '--session-fd' '--metrics-listen' '--tls-client-ca' '--cublaslt' -- "$gpud" -h
check smi.unknown 2 "^remote-smi: unknown option '--bogus'$" "^Try 'remote-smi --help'.$" -- "$smi" --bogus
check smi.unknown_eq 2 "^remote-smi: unknown option '--bogus'$" -- "$smi" --bogus=1
check smi.novalue 2 "^remote-smi: option '--port' needs a value$" -- "$smi" --port
check smi.badport 2 "^remote-smi: option '--port' takes a number from 1 to 65535, not 'x'$" -- "$smi" --port=x
check smi.extra 2 "^remote-smi: unexpected argument 'x'$" -- "$smi" x
check smi.exclusive 2 'exclude each other' -- "$smi" --json --prometheus
check bench.unknown 2 "^remote-bench: unknown option '--bogus'$" -- "$bench" --bogus
check bench.badonly 2 "^remote-bench: option '--only' does not take 'gpu'$" -- "$bench" --only=gpu
check bench.badnum 2 "^remote-bench: option '--iters' takes a number" -- "$bench" --iters 0
check cubin.nocmd 2 '^remote-cubin: no command' -- "$cubin"
check cubin.unknown 2 "^remote-cubin: unknown option '--bogus'$" -- "$cubin" ls --bogus x
check cubin.novalue 2 "^remote-cubin: option '--store' needs a value$" -- "$cubin" extract x --store
check cubin.extract_usage 2 'usage: remote-cubin extract' -- "$cubin" extract --store=/tmp/x
check cubin.ls_eq 1 -- "$cubin" ls --json /nonexistent
check cubin.verify_usage 2 'usage: remote-cubin verify DIR' -- "$cubin" verify
check rg.unknown 2 "^remote-gpu: unknown option '--bogus'$" -- "$rg" info --bogus

# remote-gpud --config: settings from the file, the command line overriding
TOKEN=cmdline-token-7c2e
printf '%s\n' "$TOKEN" >"$work/token" && chmod 600 "$work/token"
cat >"$work/gpud.conf" <<CONF
# a comment, then a blank line

listen = 127.0.0.1:0
port-file = $work/port
driver = "$fake"
token-file = $work/token
device = 7
drain-seconds = 0
insecure = no
CONF
check config_override 0 '^servers answering: 1 of 1; devices: 1$' -- sh -c "
	'$gpud' --config '$work/gpud.conf' --device=0 >'$work/gpud.log' 2>&1 & echo \$! >'$work/gpud.pid'
	for i in \$(seq 100); do [ -s '$work/port' ] && break; sleep 0.05; done
	'$rg' info --server 127.0.0.1:\$(cat '$work/port') --token-file '$work/token'; st=\$?
	kill -TERM \$(cat '$work/gpud.pid'); wait; exit \$st"
# --listen=ADDR and --listen ADDR (and the other forms) serve alike
serve() { # serve NAME ARGS...: remote-gpud with ARGS answers remote-gpu info
	local name=$1
	shift
	check "$name" 0 '^servers answering: 1 of 1; devices: 1$' -- sh -c "
	'$gpud' $* --port-file='$work/$name.port' >'$work/$name.log' 2>&1 & echo \$! >'$work/$name.pid'
	for i in \$(seq 100); do [ -s '$work/$name.port' ] && break; sleep 0.05; done
	'$rg' info --server 127.0.0.1:\$(cat '$work/$name.port') --token-file '$work/token'; st=\$?
	kill -TERM \$(cat '$work/$name.pid'); wait; exit \$st"
}
serve listen_eq "--listen=127.0.0.1:0 --driver='$fake' --token-file='$work/token' --drain-seconds=0 --device=0"
serve listen_space "--listen 127.0.0.1:0 --driver '$fake' --token-file '$work/token' --drain-seconds 0 --device 0"
serve listen_thread "--isolation=thread --listen 127.0.0.1:0 --driver '$fake' --token-file '$work/token'"
check config_device 1 'device' -- timeout 20 "$gpud" --config "$work/gpud.conf"
printf 'token = secret\n' >"$work/tok.conf"
check config_token 2 "tok.conf:1: 'token' is not allowed in a file \(use token-file\)" -- "$gpud" --config "$work/tok.conf"
printf 'listen 127.0.0.1:0\n' >"$work/bad.conf"
check config_syntax 2 "bad.conf:1: not 'name = value'" -- "$gpud" --config "$work/bad.conf"
printf 'bogus = 1\n' >"$work/unknown.conf"
check config_unknown 2 "unknown option '--bogus'" -- "$gpud" --config "$work/unknown.conf"
check config_missing 1 'nonexistent.conf: No such file' -- "$gpud" --config "$work/nonexistent.conf"
[ $fail -eq 0 ] && echo "all command-line checks passed"
exit $((fail ? 1 : 0))
