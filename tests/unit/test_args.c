/* rg_args_split (common/src/args.c): "--opt=VALUE" becomes "--opt" "VALUE"
 * before a lone "--" and nowhere else; the value still points into the original
 * argument (what remote-gpud scrubs for --token); an argv without any is left
 * as it was. */
#include <string.h>

#include "check.h"
#include "rg_args.h"

static void test_split(void)
{
	char a0[] = "prog", a1[] = "--listen=0.0.0.0:7420", a2[] = "--device", a3[] = "1", a4[] = "--token=s=cret",
	     a5[] = "-x=y", a6[] = "--", a7[] = "--child=1";
	char *in[] = {a0, a1, a2, a3, a4, a5, a6, a7, NULL};
	int argc = 8;
	char **argv = in;

	CHECK_EQ(rg_args_split(&argc, &argv), 0);
	CHECK_EQ(argc, 10);
	CHECK(argv != in);
	CHECK(!strcmp(argv[1], "--listen") && !strcmp(argv[2], "0.0.0.0:7420"));
	CHECK(!strcmp(argv[3], "--device") && !strcmp(argv[4], "1"));
	CHECK(!strcmp(argv[5], "--token") && !strcmp(argv[6], "s=cret")); /* split at the first '=' */
	CHECK(argv[6] == a4 + strlen("--token="));                          /* in place: scrubbing reaches it */
	CHECK(!strcmp(argv[7], "-x=y"));                                     /* short options are not ours */
	CHECK(!strcmp(argv[8], "--") && !strcmp(argv[9], "--child=1"));     /* after "--": as is */
	CHECK(argv[10] == NULL);
}

static void test_nothing_to_split(void)
{
	char a0[] = "prog", a1[] = "--listen", a2[] = "x:1";
	char *in[] = {a0, a1, a2, NULL};
	int argc = 3;
	char **argv = in;
	CHECK_EQ(rg_args_split(&argc, &argv), 0);
	CHECK(argv == in);
	CHECK_EQ(argc, 3);
}

static void test_version(void)
{
	const char *v = rg_version();
	CHECK(v && v[0] >= '0' && v[0] <= '9'); /* "0.1.0" or "0.1.0 (git ...)" */
}

int main(void)
{
	test_split();
	test_nothing_to_split();
	test_version();
	return check_summary("test_args");
}
