/*
 * servebench's stand-in for pyxis + enroot under scripts/slurm-local: a SPANK plugin of our own (not pyxis's code)
 * that takes pyxis's srun flags and gives a step what an unnamed pyxis container gives it on gb200-nv, so that the
 * local Slurm meets what the cluster's containers do to a launch:
 *
 *   --container-image=FILE.sqsh   the image is unpacked for this step alone (enroot create: unsquashfs into a folder of
 *                                 its own, removed when the step ends; /tmp and every other write vanish with it); an
 *                                 image that is not a .sqsh file here fails the step (there is no registry to pull from)
 *   --container-mounts=SRC:DST[:ro+...],...   bind mounts; a SRC that does not exist fails the step's start, as enroot
 *                                 refuses it; "ro" mounts read-only
 *   the image's environment       (its /etc/environment, where enroot import writes the image's ENV) is set over the
 *                                 task's, the image's values winning, except the names --container-env lists; LANG,
 *                                 LANGUAGE and LC_ALL of the job are dropped; PATH is the image's
 *   --container-workdir=DIR       the task starts there (else at /)
 *   --container-name=NAME         the unpacked folder is kept under that name and used again (named containers)
 *   --container-readonly          the root filesystem is mounted read-only
 *   --servebench-node-local=PATH=BACKING,...   (not pyxis's: a stand-in's node-local disks) each PATH is the node's
 *                                 BACKING folder in the step's mount namespace, before the container's mounts resolve
 * Accepted and without effect here (root runs every step): --container-remap-root, --container-mount-home, their
 * --no- forms, --container-entrypoint, --no-container-entrypoint, --container-writable.
 *
 * Plugin arguments (plugstack.conf): runtime_path=DIR (where containers are unpacked; default /var/lib/servebench-pyxis).
 * Built by scripts/slurm-local with gcc against Debian's libslurm-dev; installed only where no real pyxis is configured.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <slurm/spank.h>

SPANK_PLUGIN(servebench_pyxis_model, 1);

#define MAXLIST 64
static char *image, *mounts, *workdir, *name, *env_keep, *node_local;
static int readonly;
static char runtime_path[1024] = "/var/lib/servebench-pyxis";
static char rootfs[2048];
static int created;                          /* this step unpacked rootfs and removes it at exit */

static int keep_arg(char **slot, const char *arg) { free(*slot); *slot = arg ? strdup(arg) : NULL; return 0; }
static int opt_image(int v, const char *a, int r) { (void)v; (void)r; return keep_arg(&image, a); }
static int opt_mounts(int v, const char *a, int r) { (void)v; (void)r; return keep_arg(&mounts, a); }
static int opt_workdir(int v, const char *a, int r) { (void)v; (void)r; return keep_arg(&workdir, a); }
static int opt_name(int v, const char *a, int r) { (void)v; (void)r; return keep_arg(&name, a); }
static int opt_env(int v, const char *a, int r) { (void)v; (void)r; return keep_arg(&env_keep, a); }
static int opt_node_local(int v, const char *a, int r) { (void)v; (void)r; return keep_arg(&node_local, a); }
static int opt_readonly(int v, const char *a, int r) { (void)a; (void)r; readonly = v; return 0; }
static int opt_accepted(int v, const char *a, int r) { (void)v; (void)a; (void)r; return 0; }

struct spank_option spank_options[] = {
	{"container-image", "FILE.sqsh", "[pyxis model] run the task in this image (a squashfs file)", 1, 0, opt_image},
	{"container-mounts", "SRC:DST[:FLAGS][,...]", "[pyxis model] bind mounts inside the container", 1, 0, opt_mounts},
	{"container-workdir", "PATH", "[pyxis model] working directory inside the container", 1, 0, opt_workdir},
	{"container-name", "NAME", "[pyxis model] keep the container under this name", 1, 0, opt_name},
	{"container-env", "NAME[,NAME...]", "[pyxis model] host variables that win over the image's", 1, 0, opt_env},
	{"container-readonly", NULL, "[pyxis model] read-only root filesystem", 0, 1, opt_readonly},
	{"container-writable", NULL, "[pyxis model] writable root filesystem", 0, 0, opt_readonly},
	{"container-remap-root", NULL, "[pyxis model] accepted", 0, 0, opt_accepted},
	{"no-container-remap-root", NULL, "[pyxis model] accepted", 0, 0, opt_accepted},
	{"container-mount-home", NULL, "[pyxis model] accepted", 0, 0, opt_accepted},
	{"no-container-mount-home", NULL, "[pyxis model] accepted", 0, 0, opt_accepted},
	{"container-entrypoint", NULL, "[pyxis model] accepted", 0, 0, opt_accepted},
	{"no-container-entrypoint", NULL, "[pyxis model] accepted", 0, 0, opt_accepted},
	{"servebench-node-local", "PATH=BACKING[,...]", "[servebench] a stand-in's node-local disks", 1, 0,
	 opt_node_local},
	SPANK_OPTIONS_TABLE_END
};

static void plugin_args(int ac, char **av)
{
	for (int i = 0; i < ac; ++i)
		if (strncmp(av[i], "runtime_path=", 13) == 0)
			snprintf(runtime_path, sizeof(runtime_path), "%s", av[i] + 13);
}

static int split(char *text, char sep, char **out)   /* in place; returns the count */
{
	int n = 0;
	for (char *tok = strtok(text, (char[]){sep, 0}); tok && n < MAXLIST; tok = strtok(NULL, (char[]){sep, 0}))
		out[n++] = tok;
	return n;
}

static int mkdirs(const char *path)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; ++p)
		if (*p == '/') { *p = 0; if (mkdir(buf, 0755) < 0 && errno != EEXIST) return -1; *p = '/'; }
	return (mkdir(buf, 0755) < 0 && errno != EEXIST) ? -1 : 0;
}

static int run(char *const argv[])                    /* a program, its output to the step's stderr */
{
	pid_t pid = fork();
	int status;
	if (pid < 0) return -1;
	if (pid == 0) { dup2(2, 1); execvp(argv[0], argv); _exit(127); }
	if (waitpid(pid, &status, 0) < 0) return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* a mount source as this step's host sees it: a node-local PATH is its BACKING folder */
static void host_source(const char *src, char *out, size_t len)
{
	snprintf(out, len, "%s", src);
	if (!node_local) return;
	char copy[4096], *pairs[MAXLIST];
	snprintf(copy, sizeof(copy), "%s", node_local);
	for (int i = 0, n = split(copy, ',', pairs); i < n; ++i) {
		char *backing = strchr(pairs[i], '=');
		if (!backing) continue;
		*backing++ = 0;
		size_t k = strlen(pairs[i]);
		if (strncmp(src, pairs[i], k) == 0 && (src[k] == 0 || src[k] == '/'))
			snprintf(out, len, "%s%s", backing, src + k);
	}
}

static int check_mounts(void)
{
	if (!mounts) return 0;
	char copy[8192], *items[MAXLIST], src[4096];
	struct stat st;
	snprintf(copy, sizeof(copy), "%s", mounts);
	for (int i = 0, n = split(copy, ',', items); i < n; ++i) {
		char *colon = strchr(items[i], ':');
		if (colon) *colon = 0;
		host_source(items[i], src, sizeof(src));
		if (stat(src, &st) < 0) {
			slurm_error("pyxis: container start failed: mount source %s does not exist on this node (enroot: "
				    "No such file or directory)", items[i]);
			return -1;
		}
	}
	return 0;
}

static void import_environment(spank_t sp)
{
	char path[64], line[8192], copy[4096], *keep[MAXLIST];
	int nkeep = 0, has_path = 0;
	if (env_keep) { snprintf(copy, sizeof(copy), "%s", env_keep); nkeep = split(copy, ',', keep); }
	const char *deny[] = {"LANG", "LANGUAGE", "LC_ALL", NULL};
	for (int i = 0; deny[i]; ++i) {
		int kept = 0;
		for (int j = 0; j < nkeep; ++j) kept |= strcmp(keep[j], deny[i]) == 0;
		if (!kept) spank_unsetenv(sp, deny[i]);
	}
	snprintf(path, sizeof(path), "/etc/environment");              /* inside the container by now */
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		char *value = strchr(line, '=');
		if (!value || line[0] == '#') continue;
		*value++ = 0;
		size_t len = strlen(value);
		if (len >= 2 && value[0] == '"' && value[len - 1] == '"') { value[len - 1] = 0; ++value; }
		int overwrite = 1;
		for (int j = 0; j < nkeep; ++j) if (strcmp(keep[j], line) == 0) overwrite = 0;
		has_path |= strcmp(line, "PATH") == 0;
		spank_setenv(sp, line, value, overwrite);
	}
	if (f) fclose(f);
	if (!has_path) spank_setenv(sp, "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
}

int slurm_spank_init(spank_t sp, int ac, char **av) { (void)sp; plugin_args(ac, av); return 0; }

/* in slurmstepd, once per step and node: where this step's container is unpacked (removed at exit) */
int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	uint32_t job = 0, step = 0;
	plugin_args(ac, av);
	if (!image) return 0;
	spank_get_item(sp, S_JOB_ID, &job);
	spank_get_item(sp, S_JOB_STEPID, &step);
	if (name) snprintf(rootfs, sizeof(rootfs), "%s/named/%u/%s", runtime_path, (unsigned)getuid(), name);
	else { snprintf(rootfs, sizeof(rootfs), "%s/%u.%u", runtime_path, job, step); created = 1; }
	return 0;
}

/* the container is created as pyxis creates it, in the task before it starts (so a failure fails the task, and
 * srun's exit status says so): the image checked, the mount sources checked, the image unpacked */
static int create(void)
{
	struct stat st;
	size_t len = strlen(image);
	if (len < 5 || strcmp(image + len - 5, ".sqsh") != 0 || stat(image, &st) < 0 || !S_ISREG(st.st_mode)) {
		slurm_error("pyxis: importing %s failed: the pyxis model imports no image from a registry; name a .sqsh file "
			    "that exists on this node", image);
		return -1;
	}
	if (check_mounts() < 0) return -1;
	if (mkdirs(runtime_path) < 0) { slurm_error("pyxis: cannot create %s: %m", runtime_path); return -1; }
	if (name && stat(rootfs, &st) == 0) return 0;                 /* a named container is used again */
	char *argv[] = {"unsquashfs", "-q", "-n", "-d", rootfs, image, NULL};
	slurm_info("pyxis: importing %s into %s", image, rootfs);
	if (run(argv) < 0) { slurm_error("pyxis: unpacking %s into %s failed", image, rootfs); return -1; }
	return 0;
}

static int bind(const char *src, const char *dst, int ro)
{
	struct stat st;
	char target[4096];
	snprintf(target, sizeof(target), "%s%s", rootfs, dst);
	if (stat(src, &st) < 0) { slurm_error("pyxis: mount source %s does not exist", src); return -1; }
	if (S_ISDIR(st.st_mode)) { if (mkdirs(target) < 0) return -1; }
	else {
		char parent[4096];
		snprintf(parent, sizeof(parent), "%s", target);
		*strrchr(parent, '/') = 0;
		if (mkdirs(parent) < 0) return -1;
		int fd = open(target, O_CREAT | O_WRONLY, 0644);
		if (fd >= 0) close(fd);
	}
	if (mount(src, target, NULL, MS_BIND | MS_REC, NULL) < 0) {
		slurm_error("pyxis: mounting %s at %s failed: %m", src, dst);
		return -1;
	}
	if (ro && mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC, NULL) < 0) {
		slurm_error("pyxis: read-only remount of %s failed: %m", dst);
		return -1;
	}
	return 0;
}

/* in the task, as root, just before it becomes the job's program: its own mount namespace, the node-local disks,
 * the container's root and mounts, then chroot */
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	(void)sp; (void)ac; (void)av;
	if (!image) return 0;
	if (create() < 0) return -1;
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		slurm_error("pyxis: a mount namespace for the container failed: %m");
		return -1;
	}
	if (node_local) {
		char copy[4096], *pairs[MAXLIST];
		snprintf(copy, sizeof(copy), "%s", node_local);
		for (int i = 0, n = split(copy, ',', pairs); i < n; ++i) {
			char *backing = strchr(pairs[i], '=');
			if (!backing) continue;
			*backing++ = 0;
			if (mkdirs(backing) < 0 || mkdirs(pairs[i]) < 0 || mount(backing, pairs[i], NULL, MS_BIND, NULL) < 0) {
				slurm_error("pyxis: node-local disk %s (%s) could not be mounted: %m", pairs[i], backing);
				return -1;
			}
		}
	}
	if (mount(rootfs, rootfs, NULL, MS_BIND | MS_REC, NULL) < 0) { slurm_error("pyxis: rootfs: %m"); return -1; }
	const char *system[] = {"/proc", "/sys", "/dev", "/etc/hosts", "/etc/resolv.conf", NULL};
	for (int i = 0; system[i]; ++i)
		if (access(system[i], F_OK) == 0 && bind(system[i], system[i], 0) < 0) return -1;
	if (mounts) {
		char copy[8192], *items[MAXLIST];
		snprintf(copy, sizeof(copy), "%s", mounts);
		for (int i = 0, n = split(copy, ',', items); i < n; ++i) {
			char *dst = strchr(items[i], ':'), *flags = NULL;
			if (dst) { *dst++ = 0; if ((flags = strchr(dst, ':'))) *flags++ = 0; } else dst = items[i];
			int ro = flags && (strcmp(flags, "ro") == 0 || strncmp(flags, "ro+", 3) == 0 || strstr(flags, "+ro"));
			if (bind(items[i], dst, ro) < 0) return -1;
		}
	}
	if (readonly && mount(NULL, rootfs, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0) {
		slurm_error("pyxis: read-only root: %m");
		return -1;
	}
	if (chroot(rootfs) < 0 || chdir("/") < 0) {
		slurm_error("pyxis: entering the container failed: %m");
		return -1;
	}
	return 0;
}

/* just before exec, after slurmstepd's own chdir to the job's folder: the container's working directory */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)sp; (void)ac; (void)av;
	if (!image) return 0;
	import_environment(sp);
	if (chdir(workdir ? workdir : "/") < 0) {
		slurm_error("pyxis: couldn't chdir to %s: %m", workdir ? workdir : "/");
		return -1;
	}
	return 0;
}

/* in slurmstepd when the step ends: an unnamed container goes with it */
int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)ac; (void)av;
	if (!spank_remote(sp) || !created) return 0;
	char *argv[] = {"rm", "-rf", "--one-file-system", rootfs, NULL};
	run(argv);
	return 0;
}
