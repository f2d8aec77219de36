/*
 * The Python frames of a trace's backtrace, for programs that reach CUDA from
 * Python (the native frames there are the interpreter's).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT */
#endif
#include "stats_int.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define MAX_PYFRAMES 48

typedef struct py_api {
	int ok;
	int (*IsInitialized)(void);
	int (*IsFinalizing)(void);
	int (*GILState_Check)(void);
	void *(*GetFrame)(void);
	void *(*FrameGetCode)(void *);
	void *(*FrameGetBack)(void *);
	int (*FrameGetLineNumber)(void *);
	void *(*GetAttrString)(void *, const char *);
	const char *(*AsUTF8)(void *);
	void (*DecRef)(void *);
	void (*ErrFetch)(void **, void **, void **);
	void (*ErrRestore)(void *, void *, void *);
} py_api;

static py_api PY;
static pthread_once_t py_once = PTHREAD_ONCE_INIT;

/* The interpreter's API, found at run time in whatever process we are in
 * (python links it into its executable or libpython): never linked. */
static void py_resolve(void)
{
#define SYM(field, name) *(void **)&PY.field = dlsym(RTLD_DEFAULT, name)
	SYM(IsInitialized, "Py_IsInitialized");
	SYM(IsFinalizing, "Py_IsFinalizing");
	if (!PY.IsFinalizing)
		SYM(IsFinalizing, "_Py_IsFinalizing");
	SYM(GILState_Check, "PyGILState_Check");
	SYM(GetFrame, "PyEval_GetFrame");
	SYM(FrameGetCode, "PyFrame_GetCode");
	SYM(FrameGetBack, "PyFrame_GetBack");
	SYM(FrameGetLineNumber, "PyFrame_GetLineNumber");
	SYM(GetAttrString, "PyObject_GetAttrString");
	SYM(AsUTF8, "PyUnicode_AsUTF8");
	SYM(DecRef, "Py_DecRef");
	SYM(ErrFetch, "PyErr_Fetch");
	SYM(ErrRestore, "PyErr_Restore");
#undef SYM
	PY.ok = PY.IsInitialized && PY.GILState_Check && PY.GetFrame && PY.FrameGetCode && PY.FrameGetBack &&
		PY.FrameGetLineNumber && PY.GetAttrString && PY.AsUTF8 && PY.DecRef && PY.ErrFetch && PY.ErrRestore;
}

void fe_obs_print_py_frames(FILE *f)
{
	pthread_once(&py_once, py_resolve);
	if (!PY.IsInitialized)
		return; /* not a Python process */
	if (!PY.ok) {
		fprintf(f, "    python: this interpreter lacks PyFrame_GetCode/PyFrame_GetBack (Python < 3.9)\n");
		return;
	}
	if (!PY.IsInitialized() || (PY.IsFinalizing && PY.IsFinalizing())) {
		fprintf(f, "    python: interpreter not running\n");
		return;
	}
	/* Only the thread that holds the GIL may touch Python objects. */
	if (!PY.GILState_Check()) {
		fprintf(f, "    python: this thread does not hold the GIL (no Python frames)\n");
		return;
	}
	void *et = NULL, *ev = NULL, *tb = NULL;
	PY.ErrFetch(&et, &ev, &tb); /* our attribute lookups must not disturb a pending exception */
	void *fr = PY.GetFrame(); /* borrowed */
	int owned = 0, i = 0;
	if (!fr)
		fprintf(f, "    python: no Python frame on this thread\n");
	while (fr && i < MAX_PYFRAMES) {
		void *code = PY.FrameGetCode(fr);
		void *name = code ? PY.GetAttrString(code, "co_name") : NULL;
		void *file = code ? PY.GetAttrString(code, "co_filename") : NULL;
		const char *n = name ? PY.AsUTF8(name) : NULL, *fl = file ? PY.AsUTF8(file) : NULL;
		fprintf(f, "    py#%d File \"%s\", line %d, in %s\n", i++, fl ? fl : "?", PY.FrameGetLineNumber(fr),
			n ? n : "?");
		if (name)
			PY.DecRef(name);
		if (file)
			PY.DecRef(file);
		if (code)
			PY.DecRef(code);
		void *back = PY.FrameGetBack(fr); /* new reference */
		if (owned)
			PY.DecRef(fr);
		fr = back;
		owned = 1;
	}
	if (fr && owned)
		PY.DecRef(fr);
	PY.ErrRestore(et, ev, tb);
}
