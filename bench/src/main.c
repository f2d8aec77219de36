/*
 * remote-bench: command line, host description, and the JSON envelope around the
 * benchmark sections (cuda_bench.c, tcp_bench.c). bench/README.md says what each
 * number means; bench/run-gpu.sh runs it locally and through libremote.so and writes
 * the ratios against the targets.
 */
#include "bench.h"
#include "rg_args.h"
#include "rg_opt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: remote-bench [options]\n"
		"  -h, --help            this text\n"
		"  --version             print the version (options take --opt VALUE and --opt=VALUE;\n"
		"                        usage errors exit 2)\n"
		"  --only cuda|copy|tcp|shm|all  which benchmarks (default all; copy: of the CUDA\n"
		"                        sections the copy bandwidth alone)\n"
		"  --json FILE           also write the results as JSON\n"
		"  --iters N             timed calls per round-trip measurement (default 10000)\n"
		"  --launches N          launches per launch-rate repetition (default 100000)\n"
		"  --launch-reps N       launch-rate repetitions, median reported (default 3)\n"
		"  --min-time SEC        time spent per copy / stream size (default 0.2)\n"
		"  --min-size BYTES      smallest copy (default 4096; suffixes K, M)\n"
		"  --max-size BYTES      largest copy (default 256M)\n"
		"  --step 2|4            size factor between copies (default 4)\n"
		"  --device N            CUDA device (default 0)\n"
		"  --label NAME          name of this run in the JSON (default local, or remote\n"
		"                        when LD_PRELOAD names libremote)\n"
		"Run plainly it measures local CUDA; with LD_PRELOAD=libremote.so and\n"
		"REMOTE_GPU=host:port, the remote path. The TCP baselines use 127.0.0.1, the shm\n"
		"baselines the shm transport alone (a unix socket under $TMPDIR).\n");
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (*end == 'i' || *end == 'B')
		end += strspn(end, "iB");
	if (*end || v == 0)
		return -1;
	*out = (size_t)v;
	return 0;
}

static void cpu_model(char *buf, size_t len)
{
	char line[512];
	FILE *f = fopen("/proc/cpuinfo", "r");
	snprintf(buf, len, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');
		if (strncmp(line, "model name", 10) == 0 && colon) {
			colon += 1 + strspn(colon + 1, " \t");
			colon[strcspn(colon, "\n")] = 0;
			snprintf(buf, len, "%s", colon);
			break;
		}
	}
	fclose(f);
}

void bench_checkpoint(const struct bench_opts *o, struct json *j)
{
	if (o->json_path)
		json_write_file(j, o->json_path);
}

int main(int argc, char **argv)
{
	struct bench_opts o = {
		.run_cuda = 1,
		.run_tcp = 1,
		.run_shm = 1,
		.rtt_iters = 10000,
		.launches = 100000,
		.launch_reps = 3,
		.min_time = 0.2,
		.min_size = 4 * KiB,
		.max_size = 256 * MiB,
		.step = 4,
	};
	static const struct option longopts[] = {
		{"only", required_argument, NULL, 'o'},     {"json", required_argument, NULL, 'j'},
		{"iters", required_argument, NULL, 'i'},    {"launches", required_argument, NULL, 'l'},
		{"launch-reps", required_argument, NULL, 'r'}, {"min-time", required_argument, NULL, 't'},
		{"min-size", required_argument, NULL, 's'}, {"max-size", required_argument, NULL, 'S'},
		{"step", required_argument, NULL, 'f'},     {"device", required_argument, NULL, 'd'},
		{"label", required_argument, NULL, 'L'},    {"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},        {NULL, 0, NULL, 0},
	};
	int c;
	long lv = 0;
	while ((c = rg_opt_next(argc, argv, ":h", longopts, "remote-bench")) != -1) {
		int bad = 0;
		switch (c) {
		case 'h': usage(stdout); return 0;
		case 'V': rg_version_print(stdout, "remote-bench"); return 0;
		case 'o':
			o.copy_only = !strcmp(optarg, "copy");
			o.run_cuda = !strcmp(optarg, "cuda") || !strcmp(optarg, "all") || o.copy_only;
			o.run_tcp = !strcmp(optarg, "tcp") || !strcmp(optarg, "all");
			o.run_shm = !strcmp(optarg, "shm") || !strcmp(optarg, "all");
			bad = !o.run_cuda && !o.run_tcp && !o.run_shm;
			break;
		case 'j': o.json_path = optarg; break;
		case 'i': bad = rg_opt_long("remote-bench", "--iters", optarg, 1, 1L << 30, &lv) != 0; o.rtt_iters = (int)lv; break;
		case 'l': bad = rg_opt_long("remote-bench", "--launches", optarg, 1, 1L << 30, &lv) != 0; o.launches = (int)lv; break;
		case 'r': bad = rg_opt_long("remote-bench", "--launch-reps", optarg, 1, 1000, &lv) != 0; o.launch_reps = (int)lv; break;
		case 't': bad = (o.min_time = atof(optarg)) <= 0; break;
		case 's': bad = parse_size(optarg, &o.min_size) != 0; break;
		case 'S': bad = parse_size(optarg, &o.max_size) != 0 || o.max_size > ((size_t)1 << 31); break;
		case 'f':
			o.step = atoi(optarg);
			bad = o.step != 2 && o.step != 4;
			break;
		case 'd': bad = rg_opt_long("remote-bench", "--device", optarg, 0, 1024, &lv) != 0; o.device = (int)lv; break;
		case 'L': o.label = optarg; break;
		default: return RG_EXIT_USAGE;
		}
		if (bad && optarg && c != 'i' && c != 'l' && c != 'r' && c != 'd') {
			const char *name = "";
			for (const struct option *lo = longopts; lo->name; lo++)
				if (lo->val == c)
					name = lo->name;
			return rg_opt_error("remote-bench", "option '--%s' does not take '%s'", name, optarg);
		}
		if (bad)
			return RG_EXIT_USAGE;
	}
	if (optind < argc)
		return rg_opt_error("remote-bench", "unexpected argument '%s'", argv[optind]);
	if (o.min_size > o.max_size)
		return rg_opt_error("remote-bench", "--min-size is larger than --max-size");

	const char *preload = getenv("LD_PRELOAD"), *remote = getenv("REMOTE_GPU");
	if (!o.label)
		o.label = preload && strstr(preload, "libremote") ? "remote" : "local";

	char host[256] = "unknown", cpu[256], stamp[64];
	time_t now = time(NULL);
	bench_clock_init();
	gethostname(host, sizeof(host) - 1);
	cpu_model(cpu, sizeof(cpu));
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	printf("remote-bench: run '%s' on %s (%s, %ld cpus) at %s; samples timed by %s\n", o.label, host, cpu,
	       sysconf(_SC_NPROCESSORS_ONLN), stamp, bench_clock_name());
	if (preload || remote)
		printf("  LD_PRELOAD=%s REMOTE_GPU=%s\n", preload ? preload : "", remote ? remote : "");

	struct json j;
	json_init(&j);
	json_open(&j, NULL, '{');
	json_str(&j, "tool", "remote-bench");
	json_int(&j, "format", 1);
	json_str(&j, "label", o.label);
	json_str(&j, "time", stamp);
	json_str(&j, "host", host);
	json_str(&j, "cpu", cpu);
	json_int(&j, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
	json_str(&j, "clock", bench_clock_name());
	json_str(&j, "ld_preload", preload);
	json_str(&j, "remote_gpu", remote);
	json_open(&j, "params", '{');
	json_int(&j, "rtt_iters", o.rtt_iters);
	json_int(&j, "launches", o.launches);
	json_num(&j, "min_time_s", o.min_time);
	json_int(&j, "min_size", (long long)o.min_size);
	json_int(&j, "max_size", (long long)o.max_size);
	json_int(&j, "step", o.step);
	json_close(&j, '}');

	int rc = 0;
	bench_checkpoint(&o, &j);
	if (o.run_tcp && tcp_bench(&o, &j) != 0)
		rc = 1;
	bench_checkpoint(&o, &j);
	if (o.run_shm && shm_bench(&o, &j) != 0)
		rc = 1;
	bench_checkpoint(&o, &j);
	if (o.run_cuda && cuda_bench(&o, &j) != 0)
		rc = 1;
	json_close(&j, '}');

	if (o.json_path && json_write_file(&j, o.json_path) != 0) {
		perror(o.json_path);
		rc = 1;
	}
	json_free(&j);
	return rc;
}
