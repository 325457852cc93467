// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-crypt-lbs: parsing of the crypt table line - optional parameters,
 * the cipher specification and the key - and setting the key.
 */

#include <linux/ctype.h>
#include <linux/kernel.h>
#include <linux/key.h>
#include <linux/log2.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <keys/encrypted-type.h>
#include <keys/trusted-type.h>
#include <keys/user-type.h>

#include "dm-crypt-lbs.h"

const char * const lbs_opt_names[LBS_NR_OPTS] = {
	[LBS_OPT_ALLOW_DISCARDS] = "allow_discards",
	[LBS_OPT_SAME_CPU_CRYPT] = "same_cpu_crypt",
	[LBS_OPT_HIGH_PRIORITY] = "high_priority",
	[LBS_OPT_SUBMIT_FROM_CRYPT_CPUS] = "submit_from_crypt_cpus",
	[LBS_OPT_NO_READ_WORKQUEUE] = "no_read_workqueue",
	[LBS_OPT_NO_WRITE_WORKQUEUE] = "no_write_workqueue",
	[LBS_OPT_INTEGRITY] = "integrity",
	[LBS_OPT_SECTOR_SIZE] = "sector_size",
	[LBS_OPT_IV_LARGE_SECTORS] = "iv_large_sectors",
	[LBS_OPT_INTEGRITY_KEY_SIZE] = "integrity_key_size",
};

/* A plain unsigned decimal: digits only, no sign, no space, no overflow. */
int lbs_parse_u64(const char *s, u64 *val)
{
	const char *p;

	if (!*s)
		return -EINVAL;
	for (p = s; *p; p++)
		if (!isdigit(*p))
			return -EINVAL;
	return kstrtoull(s, 10, val);
}

static int lbs_parse_sector_size(struct dm_target *ti, struct lbs_config *cc,
				 const char *arg)
{
	unsigned int bound = LBS_MAX_SECTOR_SIZE;
	u64 val;
	int r;

	r = lbs_parse_u64(arg, &val);
	if (r == -ERANGE || (!r && val > bound))
		return lbs_reject(ti, "sector_size above the largest this kernel allows",
				  "sector_size %s exceeds %u, the largest this kernel allows (%s)",
				  arg, bound, LBS_MAX_SECTOR_REASON);
	if (r)
		return lbs_reject(ti, "sector_size is not an unsigned decimal number",
				  "sector_size \"%s\" is not an unsigned decimal number (allowed: powers of two from %u to %u)",
				  arg, LBS_MIN_SECTOR_SIZE, bound);
	if (val < LBS_MIN_SECTOR_SIZE)
		return lbs_reject(ti, "sector_size below 512",
				  "sector_size %s is below %u, the smallest allowed",
				  arg, LBS_MIN_SECTOR_SIZE);
	if (!is_power_of_2(val))
		return lbs_reject(ti, "sector_size not a power of two",
				  "sector_size %s is not a power of two (allowed: powers of two from %u to %u)",
				  arg, LBS_MIN_SECTOR_SIZE, bound);
	if (ti->len & ((val >> SECTOR_SHIFT) - 1))
		return lbs_reject(ti, "Target length is not a multiple of sector_size",
				  "device length %llu sectors is not a multiple of sector_size %s (%llu sectors)",
				  (unsigned long long)ti->len, arg,
				  val >> SECTOR_SHIFT);
	cc->sector_size = val;
	cc->sector_shift = ilog2(val) - SECTOR_SHIFT;
	if (val != LBS_MIN_SECTOR_SIZE)
		set_bit(LBS_OPT_SECTOR_SIZE, &cc->opts);
	else
		clear_bit(LBS_OPT_SECTOR_SIZE, &cc->opts);
	return 0;
}

/*
 * One optional parameter: a flag, "<name>:<value>", or an error.  As
 * dm-crypt matches them: a flag in any case, a valued option's name exactly.
 */
static int lbs_parse_option(struct dm_target *ti, struct lbs_config *cc,
			    const char *opt)
{
	unsigned int i;

	for (i = 0; i < LBS_NR_OPTS; i++) {
		size_t len = strlen(lbs_opt_names[i]);

		if (!lbs_opt_valued(i)) {
			if (strcasecmp(opt, lbs_opt_names[i]))
				continue;
			set_bit(i, &cc->opts);
			return 0;
		}
		if (strncmp(opt, lbs_opt_names[i], len) || opt[len] != ':')
			continue;
		switch (i) {
		case LBS_OPT_SECTOR_SIZE:
			return lbs_parse_sector_size(ti, cc, opt + len + 1);
		case LBS_OPT_INTEGRITY:
			return lbs_parse_integrity(ti, cc, opt + len + 1);
		default:
			return lbs_parse_integrity_key_size(ti, cc,
							    opt + len + 1);
		}
	}
	return lbs_reject(ti, "Unknown optional parameter",
			  "unknown optional parameter \"%s\"", opt);
}

int lbs_parse_options(struct dm_target *ti, struct lbs_config *cc,
		      unsigned int argc, char **argv)
{
	static const struct dm_arg count_arg = {
		0, LBS_MAX_OPT_PARAMS, "Invalid number of optional parameters (allowed 0 to 9)"
	};
	struct dm_arg_set as = { .argc = argc, .argv = argv };
	unsigned int n;
	int r;

	r = dm_read_arg_group(&count_arg, &as, &n, &ti->error);
	if (r)
		return r;
	if (as.argc != n)
		return lbs_reject(ti, "Optional parameter count does not match the parameters",
				  "%u optional parameters declared but %u given",
				  n, n + as.argc);
	while (n--) {
		r = lbs_parse_option(ti, cc, dm_shift_arg(&as));
		if (r)
			return r;
	}
	return 0;
}

/* Split "cipher[:keycount]-chainmode-ivmode[:ivopts]" into a crypto API name. */
static int lbs_parse_legacy(struct dm_target *ti, struct lbs_config *cc,
			    char *spec, char *api, char **ivmode, char **ivopts)
{
	char *cipher, *keycount, *chainmode, *rest = spec;
	int n;

	if (strchr(spec, '('))
		return lbs_reject(ti, "Crypto API name without capi: prefix",
				  "cipher %s: a crypto API name needs the capi: prefix",
				  cc->cipher_string);
	if (cc->want_aead)
		return lbs_reject(ti, "integrity:<bytes>:aead needs a capi: cipher",
				  "cipher %s: an AEAD cipher is named in the capi: form, as in capi:gcm(aes)-random",
				  cc->cipher_string);
	keycount = strsep(&rest, "-");
	cipher = strsep(&keycount, ":");
	cc->tfms_count = 1;
	if (keycount) {
		u64 val;

		if (lbs_parse_u64(keycount, &val) || !val || val > 64 ||
		    !is_power_of_2(val))
			return lbs_reject(ti, "Key count is not a power of two from 1 to 64",
					  "cipher %s: key count %s is not a power of two from 1 to 64",
					  cc->cipher_string, keycount);
		cc->tfms_count = val;
	}
	chainmode = strsep(&rest, "-");
	*ivmode = strsep(&rest, ":");
	*ivopts = rest;

	/* As dm-crypt: a bare cipher name (or "<cipher>-plain") is cbc-plain. */
	if (!chainmode || (!strcmp(chainmode, "plain") && !*ivmode)) {
		chainmode = "cbc";
		*ivmode = "plain";
	}
	if (strcmp(chainmode, "ecb") && !*ivmode)
		return lbs_reject(ti, "Cipher needs an IV mode",
				  "cipher %s: chaining mode %s needs an IV mode",
				  cc->cipher_string, chainmode);
	if (*ivmode && !strcmp(*ivmode, "essiv"))
		n = snprintf(api, CRYPTO_MAX_ALG_NAME, "essiv(%s(%s),%s)",
			     chainmode, cipher, *ivopts ? *ivopts : "");
	else
		n = snprintf(api, CRYPTO_MAX_ALG_NAME, "%s(%s)", chainmode,
			     cipher);
	if (n >= CRYPTO_MAX_ALG_NAME)
		return lbs_reject(ti, "Cipher specification too long",
				  "cipher %s: name too long", cc->cipher_string);
	return 0;
}

/* Split "capi:<crypto API spec>-ivmode[:ivopts]". */
static int lbs_parse_capi(struct dm_target *ti, struct lbs_config *cc,
			  char *spec, char *api, char **ivmode, char **ivopts)
{
	int n;

	cc->tfms_count = 1;
	*ivopts = strrchr(spec, ':');
	if (*ivopts)
		*(*ivopts)++ = '\0';
	*ivmode = strrchr(spec, '-');
	if (*ivmode)
		*(*ivmode)++ = '\0';
	if (strstarts(spec, "authenc(") && !cc->want_aead)
		return lbs_reject(ti, "AEAD cipher needs integrity:<bytes>:aead",
				  "cipher %s: an authenc() cipher is AEAD; it needs the option integrity:<bytes>:aead",
				  cc->cipher_string);
	/* loop-AES in the capi: form is always its 64-key layout */
	if (*ivmode && !strcmp(*ivmode, "lmk") && !cc->want_aead)
		cc->tfms_count = 64;
	if (*ivmode && !strcmp(*ivmode, "essiv"))
		n = snprintf(api, CRYPTO_MAX_ALG_NAME, "essiv(%s,%s)", spec,
			     *ivopts ? *ivopts : "");
	else
		n = snprintf(api, CRYPTO_MAX_ALG_NAME, "%s", spec);
	if (n >= CRYPTO_MAX_ALG_NAME)
		return lbs_reject(ti, "Cipher specification too long",
				  "cipher %s: name too long", cc->cipher_string);
	return 0;
}

static int lbs_alloc_tfms(struct dm_target *ti, struct lbs_config *cc,
			  const char *api)
{
	unsigned int i;

	if (cc->want_aead)
		return lbs_aead_alloc(ti, cc, api);
	cc->tfms = kcalloc(cc->tfms_count, sizeof(*cc->tfms), GFP_KERNEL);
	if (!cc->tfms) {
		ti->error = "Cannot allocate the cipher transforms";
		return -ENOMEM;
	}
	for (i = 0; i < cc->tfms_count; i++) {
		struct crypto_skcipher *tfm;

		tfm = crypto_alloc_skcipher(api, 0, CRYPTO_ALG_ALLOCATES_MEMORY);
		if (IS_ERR(tfm)) {
			int r = PTR_ERR(tfm);

			DMERR("cipher %s: this kernel has no skcipher %s (%d)",
			      cc->cipher_string, api, r);
			ti->error = "Cipher not available in this kernel";
			/* an unknown algorithm is bad input, like any other */
			return r == -ENOENT ? -EINVAL : r;
		}
		cc->tfms[i] = tfm;
	}
	DMDEBUG("%s uses %s", api,
		crypto_skcipher_driver_name(cc->tfms[0]));
	cc->iv_align = crypto_skcipher_alignmask(cc->tfms[0]) + 1;
	cc->iv_size = crypto_skcipher_ivsize(cc->tfms[0]);
	return 0;
}

void lbs_free_cipher(struct lbs_config *cc)
{
	unsigned int i;

	lbs_iv_dtr(cc);
	lbs_aead_free(cc);
	if (cc->tfms) {
		for (i = 0; i < cc->tfms_count; i++)
			if (cc->tfms[i])
				crypto_free_skcipher(cc->tfms[i]);
		kfree(cc->tfms);
		cc->tfms = NULL;
	}
	kfree(cc->cipher_string);
	cc->cipher_string = NULL;
}

int lbs_parse_cipher(struct dm_target *ti, struct lbs_config *cc,
		     const char *cipher_in, char *key)
{
	char *spec, *api, *ivmode = NULL, *ivopts = NULL;
	int r;

	cc->cipher_string = kstrdup(cipher_in, GFP_KERNEL);
	spec = kstrdup(cipher_in, GFP_KERNEL);
	api = kmalloc(CRYPTO_MAX_ALG_NAME, GFP_KERNEL);
	if (!cc->cipher_string || !spec || !api) {
		ti->error = "Cannot allocate the cipher specification";
		r = -ENOMEM;
		goto out;
	}
	if (strstarts(spec, "capi:"))
		r = lbs_parse_capi(ti, cc, spec + strlen("capi:"), api,
				   &ivmode, &ivopts);
	else
		r = lbs_parse_legacy(ti, cc, spec, api, &ivmode, &ivopts);
	if (r)
		goto out;

	r = lbs_iv_lookup(ti, cc, ivmode);
	if (r)
		goto out;
	if (cc->iv_ops && !strcmp(cc->iv_ops->name, "essiv") && !ivopts) {
		r = lbs_reject(ti, "essiv needs a hash",
			       "cipher %s: essiv needs a hash, as in essiv:sha256",
			       cc->cipher_string);
		goto out;
	}
	if (cc->want_aead && cc->iv_ops && !cc->iv_ops->aead_ok) {
		r = lbs_reject(ti, "IV mode not usable with an AEAD cipher",
			       "cipher %s: IV mode %s works on the data or an skcipher; with AEAD use plain64, random, essiv, benbi, plain, plain64be or null",
			       cc->cipher_string, cc->iv_ops->name);
		goto out;
	}
	r = lbs_alloc_tfms(ti, cc, api);
	if (r)
		goto out;

	if (cc->iv_size && !cc->iv_ops) {
		/*
		 * Only a capi: name gets here.  dm-crypt loads it and hands the
		 * cipher an IV buffer it never fills, so what it writes cannot
		 * be read back reliably: refuse instead.
		 */
		r = lbs_reject(ti, "Cipher needs an IV mode",
			       "cipher %s: %s takes a %u-byte IV; name an IV mode, as in %s-plain64",
			       cc->cipher_string, api, cc->iv_size,
			       cc->cipher_string);
		goto out;
	}
	if (cc->iv_size) {
		/* room for at least a 64-bit sector number, as dm-crypt */
		cc->iv_size = max_t(unsigned int, cc->iv_size, sizeof(u64));
	} else if (cc->iv_ops) {
		DMWARN("cipher %s takes no IV; IV mode %s ignored",
		       cc->cipher_string, cc->iv_ops->name);
		cc->iv_ops = NULL;
	}
	/* random: the IV is stored after the tag, in the integrity metadata */
	if (cc->iv_ops && cc->iv_ops->stored)
		cc->stored_iv_size = cc->iv_size;
	cc->key_parts = cc->tfms_count;
	if (cc->iv_ops && cc->iv_ops->ctr) {
		r = cc->iv_ops->ctr(cc, ti, ivopts);
		if (r)
			goto out;
	}
	/* the IV mode's own key bytes (key_extra_size) follow the cipher keys */
	if (cc->key_size < cc->key_extra_size ||
	    (cc->key_size - cc->key_extra_size) % cc->tfms_count) {
		r = lbs_reject(ti, "Key does not split into key-count equal keys",
			       "key of %u bytes (%u for the IV mode) cannot be split into %u equal keys",
			       cc->key_size, cc->key_extra_size, cc->tfms_count);
		goto out;
	}

	r = lbs_set_key(cc, key);
	if (r) {
		DMERR("key for %s: not accepted (%d): %s", cc->cipher_string, r,
		      "wrong length for the cipher, bad hex, or keyring key not found");
		ti->error = "Key refused by the cipher or not found";
		goto out;
	}
out:
	kfree(api);
	kfree(spec);
	return r;
}

static int lbs_setkey_tfms(struct lbs_config *cc)
{
	unsigned int subkey = (cc->key_size - cc->key_extra_size) /
			      cc->tfms_count;
	unsigned int i;
	int r, err = 0;

	if (cc->aead)
		return lbs_aead_setkey(cc);
	for (i = 0; i < cc->tfms_count; i++) {
		r = crypto_skcipher_setkey(cc->tfms[i], cc->key + i * subkey,
					   subkey);
		if (r)
			err = r;
	}
	if (cc->iv_ops && cc->iv_ops->init) {
		r = cc->iv_ops->init(cc);
		if (r)
			err = r;
	}
	return err;
}

static bool lbs_is_hex(const char *s)
{
	for (; *s; s++)
		if (!isxdigit(*s))
			return false;
	return true;
}

/*
 * Size in bytes of a key argument: hex digits (an even number), "-" for no
 * key, or ":<key_size>:<type>:<description>" for a keyring key.  -E2BIG
 * for a key above LBS_MAX_KEY_SIZE, -EINVAL for anything else malformed.
 */
int lbs_key_size(const char *key)
{
	const char *colon;
	char num[24];
	u64 val;
	size_t len;
	int r;

	if (!strcmp(key, "-"))
		return 0;
	if (key[0] != ':') {
		len = strlen(key);
		if (!len || len % 2 || !lbs_is_hex(key))
			return -EINVAL;
		return len / 2 > LBS_MAX_KEY_SIZE ? -E2BIG : len / 2;
	}
	colon = strchr(key + 1, ':');
	if (!colon || colon - key - 1 >= sizeof(num))
		return -EINVAL;
	memcpy(num, key + 1, colon - key - 1);
	num[colon - key - 1] = '\0';
	r = lbs_parse_u64(num, &val);
	if (r == -ERANGE || (!r && val > LBS_MAX_KEY_SIZE))
		return -E2BIG;
	if (r || !val)
		return -EINVAL;
	return val;
}

#if LBS_HAVE_KEYRING
static int lbs_copy_user_key(struct key *key, u8 *out, unsigned int size)
{
	const struct user_key_payload *ukp = user_key_payload_locked(key);

	if (!ukp)
		return -EKEYREVOKED;
	if (ukp->datalen != size)
		return -EINVAL;
	memcpy(out, ukp->data, size);
	return 0;
}

#if LBS_HAVE_ENCRYPTED_KEYS
static int lbs_copy_encrypted_key(struct key *key, u8 *out, unsigned int size)
{
	const struct encrypted_key_payload *ekp = key->payload.data[0];

	if (!ekp)
		return -EKEYREVOKED;
	if (ekp->decrypted_datalen != size)
		return -EINVAL;
	memcpy(out, ekp->decrypted_data, size);
	return 0;
}
#endif

#if LBS_HAVE_TRUSTED_KEYS
static int lbs_copy_trusted_key(struct key *key, u8 *out, unsigned int size)
{
	const struct trusted_key_payload *tkp = key->payload.data[0];

	if (!tkp)
		return -EKEYREVOKED;
	if (tkp->key_len != size)
		return -EINVAL;
	memcpy(out, tkp->key, size);
	return 0;
}
#endif

/*
 * Fetch the payload of a keyring key, spec "<type>:<description>", into out
 * (size bytes).  request_key() may call up to user space: the caller holds
 * no lock the device's suspend or resume takes.
 */
static int lbs_read_keyring_key(const char *spec, u8 *out, unsigned int size)
{
	int (*copy)(struct key *key, u8 *out, unsigned int size);
	struct key_type *type;
	const char *desc;
	struct key *key;
	const char *p;
	int r;

	/* dm core cannot escape whitespace in status output */
	for (p = spec; *p; p++)
		if (isspace(*p))
			return -EINVAL;
	desc = strchr(spec, ':');
	if (!desc || desc == spec || !desc[1])
		return -EINVAL;
	desc++;

	if (!strncmp(spec, "logon:", desc - spec)) {
		type = &key_type_logon;
		copy = lbs_copy_user_key;
	} else if (!strncmp(spec, "user:", desc - spec)) {
		type = &key_type_user;
		copy = lbs_copy_user_key;
#if LBS_HAVE_ENCRYPTED_KEYS
	} else if (!strncmp(spec, "encrypted:", desc - spec)) {
		type = &key_type_encrypted;
		copy = lbs_copy_encrypted_key;
#endif
#if LBS_HAVE_TRUSTED_KEYS
	} else if (!strncmp(spec, "trusted:", desc - spec)) {
		type = &key_type_trusted;
		copy = lbs_copy_trusted_key;
#endif
	} else {
		return -EINVAL;
	}

	key = request_key(type, desc, NULL);
	if (IS_ERR(key))
		return PTR_ERR(key);
	down_read(&key->sem);
	r = copy(key, out, size);
	up_read(&key->sem);
	key_put(key);
	return r;
}
#else
static int lbs_read_keyring_key(const char *spec, u8 *out, unsigned int size)
{
	return -EINVAL;
}
#endif

/*
 * Decode a key argument whose size lbs_key_size() checked against
 * cc->key_size into new->bytes, and for a keyring key keep its
 * "<type>:<description>" in new->string.  Touches no state of the device;
 * may sleep and call up to user space.  The argument is overwritten.
 */
int lbs_read_key(struct lbs_config *cc, char *arg, struct lbs_key *new)
{
	size_t len = strlen(arg);
	int r = -EINVAL;

	new->string = NULL;
	if (!cc->key_size) {
		if (!strcmp(arg, "-"))
			r = 0;
	} else if (arg[0] == ':') {
		const char *spec = strchr(arg + 1, ':');

		if (spec) {
			new->string = kstrdup(spec + 1, GFP_NOIO);
			r = new->string ?
			    lbs_read_keyring_key(new->string, new->bytes,
						 cc->key_size) : -ENOMEM;
		}
	} else {
		r = hex2bin(new->bytes, arg, cc->key_size);
	}
	memset(arg, '0', len);
	if (r) {
		kfree_sensitive(new->string);
		new->string = NULL;
	}
	return r;
}

/*
 * Give the transforms a new key, all or nothing: if a transform or the IV
 * mode refuses it, every transform gets the previous key back (a wiped key
 * stays wiped), and the device keeps its key, its state and its status.
 * The device is suspended or not yet live: no request is in flight.
 * Takes new->string; the caller wipes new->bytes.
 */
int lbs_apply_key(struct lbs_config *cc, struct lbs_key *new)
{
	bool was_valid = test_bit(LBS_KEY_VALID, &cc->state);
	u8 *old = NULL;
	int r;

	if (was_valid && cc->key_size) {
		/* GFP_NOIO: a "key set" comes while the device is suspended */
		old = kmemdup(cc->key, cc->key_size, GFP_NOIO);
		if (!old) {
			r = -ENOMEM;
			goto out;
		}
	}
	memcpy(cc->key, new->bytes, cc->key_size);
	r = lbs_setkey_tfms(cc);
	if (!r) {
		kfree_sensitive(cc->key_string);
		cc->key_string = new->string;
		new->string = NULL;
		set_bit(LBS_KEY_VALID, &cc->state);
		goto out;
	}
	if (!was_valid) {
		/* nothing to go back to: the transforms get a random key */
		if (lbs_wipe_key(cc))
			DMERR("cannot put a random key back in the transforms");
		goto out;
	}
	if (cc->key_size)
		memcpy(cc->key, old, cc->key_size);
	if (lbs_setkey_tfms(cc)) {
		/* cannot happen: every transform took this key before */
		DMERR("the previous key no longer loads; set a key before resume");
		lbs_wipe_key(cc);
	}
out:
	kfree_sensitive(old);
	kfree_sensitive(new->string);
	new->string = NULL;
	return r;
}

/*
 * Set the key from a table argument (the constructor: nothing runs on the
 * device yet).  The argument is overwritten.
 */
int lbs_set_key(struct lbs_config *cc, char *key)
{
	struct lbs_key new;
	int r;

	new.bytes = kmalloc(max(cc->key_size, 1U), GFP_KERNEL);
	if (!new.bytes) {
		memset(key, '0', strlen(key));
		return -ENOMEM;
	}
	r = lbs_read_key(cc, key, &new);
	if (!r)
		r = lbs_apply_key(cc, &new);
	kfree_sensitive(new.bytes);
	return r;
}

int lbs_wipe_key(struct lbs_config *cc)
{
	int r;

	clear_bit(LBS_KEY_VALID, &cc->state);
	kfree_sensitive(cc->key_string);
	cc->key_string = NULL;
	/* replace the key in the transforms by a random one, then forget it */
	get_random_bytes(cc->key, cc->key_size);
	r = lbs_setkey_tfms(cc);
	memzero_explicit(cc->key, cc->key_size);
	return r;
}
