/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A stand-in for a kernel's dm-crypt.ko, for in_tree_test.cpp: compiled with
 * "cc -c" (and a cross compiler) into a relocatable object that holds what
 * the reader looks for in the real module: a struct target_type laid out as
 * include/linux/device-mapper.h lays it out (features, name, module, version),
 * named crypt_target, whose name and module fields are relocations to a
 * string and to __this_module.  FIXTURE_MINOR, FIXTURE_NAME and crypt_target
 * itself (-Dcrypt_target=...) are set on the command line to make variants.
 */
#ifndef FIXTURE_MINOR
#define FIXTURE_MINOR 29
#endif
#ifndef FIXTURE_NAME
#define FIXTURE_NAME crypt
#endif
#define FIXTURE_STRING(name) #name
#define FIXTURE_QUOTE(name) FIXTURE_STRING(name)

struct module;
struct target_type {
	unsigned long long features;
	const char *name;
	struct module *module;
	unsigned int version[3];
	void *ctr;
	void *dtr;
};

extern struct module __this_module;

static int fixture_ctr(void)
{
	return 0;
}

static struct target_type crypt_target = {
	.features = 0x10ULL,
	.name = FIXTURE_QUOTE(FIXTURE_NAME),
	.module = &__this_module,
	.version = { 1, FIXTURE_MINOR, 0 },
	.ctr = (void *)fixture_ctr,
};

/* Another target_type first in the section, so crypt_target is not at offset 0. */
static struct target_type other_target = {
	.name = "other",
	.module = &__this_module,
	.version = { 9, 9, 9 },
};

void *fixture_targets(int which)
{
	return which ? (void *)&crypt_target : (void *)&other_target;
}
