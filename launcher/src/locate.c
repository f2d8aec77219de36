/*
 * Where libremote.so and its driver folder are: REMOTE_GPU_LIB if set, else
 * relative to this program's own file, so that a moved install tree (a .deb,
 * DESTDIR, an image) and the build tree both work without configuration:
 *
 *   install tree  PREFIX/bin/remote-gpu      PREFIX/LIBDIR/libremote.so
 *                                            PREFIX/LIBDIR/remote-gpu/driver/
 *   build tree    BUILD/launcher/remote-gpu  BUILD/frontend/libremote.so
 *                                            BUILD/frontend/driver/
 *
 * LIBDIR is CMake's CMAKE_INSTALL_LIBDIR ("lib", or "lib/x86_64-linux-gnu"
 * for a /usr prefix on Debian), built in as LN_LIBDIR.
 */
#include "launcher.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef LN_LIBDIR
#define LN_LIBDIR "lib"
#endif

static int is_file(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The driver folder beside a libremote.so at lib: the install tree's
 * remote-gpu/driver or the build tree's driver. */
static void locate_driver(ln_paths *p)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", p->lib);
	char *d = dirname(dir);
	const char *sub[] = {"remote-gpu/driver", "driver"};
	p->driver[0] = 0;
	for (size_t i = 0; i < sizeof(sub) / sizeof(*sub); i++) {
		char cand[PATH_MAX + 32];
		snprintf(cand, sizeof(cand), "%s/%s", d, sub[i]);
		if (is_dir(cand) && strlen(cand) < sizeof(p->driver)) {
			snprintf(p->driver, sizeof(p->driver), "%s", cand);
			return;
		}
	}
}

int ln_locate(ln_paths *p, char *why, size_t cap)
{
	const char *env = getenv("REMOTE_GPU_LIB");
	memset(p, 0, sizeof(*p));
	if (env && *env) {
		if (!is_file(env) || strlen(env) >= sizeof(p->lib)) {
			snprintf(why, cap, "REMOTE_GPU_LIB=%s is not a file", env);
			return -1;
		}
		if (!realpath(env, p->lib))
			snprintf(p->lib, sizeof(p->lib), "%s", env);
		p->how = "REMOTE_GPU_LIB";
		locate_driver(p);
		return 0;
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		snprintf(why, cap, "cannot read /proc/self/exe to find libremote.so; set REMOTE_GPU_LIB");
		return -1;
	}
	self[n] = 0;
	char *bindir = dirname(self);
	struct {
		const char *rel, *how;
	} cand[] = {{"../" LN_LIBDIR "/libremote.so", "install tree"},
		    {"../lib/libremote.so", "install tree"},
		    {"../frontend/libremote.so", "build tree"}};
	char tried[PATH_MAX * 2] = "";
	for (size_t i = 0; i < sizeof(cand) / sizeof(*cand); i++) {
		char path[PATH_MAX * 2];
		snprintf(path, sizeof(path), "%s/%s", bindir, cand[i].rel);
		if (is_file(path) && realpath(path, p->lib)) {
			p->how = cand[i].how;
			locate_driver(p);
			return 0;
		}
		size_t t = strlen(tried);
		snprintf(tried + t, sizeof(tried) - t, "%s%s", t ? ", " : "", path);
	}
	snprintf(why, cap, "libremote.so is not where it is installed beside %s (tried %s); set REMOTE_GPU_LIB=PATH",
		 bindir, tried);
	return -1;
}
