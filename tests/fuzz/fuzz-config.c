/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for the agent's config (common/config/config.c:
 * config_parse(), with the label selectors, templates and regexes it
 * validates).
 *
 * The input is the config's JSON text. It parses, or fails with -EINVAL and
 * a message (or -ENOMEM); a parsed config is whole: its default profile
 * exists, every target's profile is found, every output template
 * validates, every pattern is compiled. Its matching functions are then
 * run once on a command line and a cgroup path taken from the input, and
 * its machineConfig selected for some label sets: no two entries for one
 * sysctl ever select one node (common/machine/machine-select.c).
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include "config.h"
#include "machine-select.h"
#include "fuzz.h"
#include "template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = fuzz_strndup(data, size), *error = NULL;
        _cleanup_(config_freep) Config *c = NULL;
        int r;

        r = config_parse(text, &c, &error);
        if (r < 0) {
                CHECK(r == -EINVAL || r == -ENOMEM);
                CHECK(!c);
                CHECK(r != -EINVAL || (error && error[0]));
                return 0;
        }
        CHECK(c && !error);
        CHECK(c->report_dir && c->report_dir[0] == '/');
        CHECK(c->machine_config_interval_usec > 0);
        CHECK(c->default_profile_ref && config_find_profile(c, c->default_profile_ref));
        for (size_t i = 0; i < c->n_machine_config; i++)
                CHECK(machine_setting_allowed(c->machine_config[i].name) && c->machine_config[i].value);
        /* Entries for one sysctl never both select a node: for the config's
         * nodeLabels, none, or the witness of any two entries' overlap, the
         * selection has each sysctl once. */
        {
                static char *const gpu[] = { "nvidia.com/gpu.present", "true", NULL };
                char *const *const tries[] = { c->node_labels, NULL, gpu };

                for (size_t k = 0; k < ELEMENTSOF(tries); k++) {
                        MachineWants w = {};

                        r = machine_wants_select(c, tries[k], true, &w);
                        CHECK(r == 0 || r == -ENOMEM);
                        machine_wants_done(&w);
                }
                for (size_t i = 0; i < c->n_machine_config; i++)
                        for (size_t k = i + 1; k < c->n_machine_config; k++) {
                                MachineWants w = {};
                                char **witness = NULL;

                                r = label_selectors_overlap(c->machine_config[i].node_selector,
                                                            c->machine_config[k].node_selector, &witness);
                                if (r <= 0)
                                        continue;
                                CHECK(!streq(c->machine_config[i].name, c->machine_config[k].name));
                                r = machine_wants_select(c, witness, true, &w);
                                CHECK(r == 0 || r == -ENOMEM);
                                machine_wants_done(&w);
                                strv_free(witness);
                        }
        }
        for (size_t i = 0; i < c->n_profiles; i++) {
                const Profile *p = &c->profiles[i];

                CHECK(p->name && p->event);
                CHECK(p->frequency >= 1 && p->frequency <= CONFIG_FREQUENCY_MAX);
                CHECK(p->unwind >= 0 && p->unwind < _UNWIND_MODE_MAX);
                CHECK(!p->output || template_validate(p->output, NULL) == 0);
                CHECK(config_find_profile(c, p->name));
                (void) profile_process_wanted(p, text);
                (void) profile_process_wanted(p, NULL);
        }
        for (size_t i = 0; i < c->n_targets; i++) {
                const Target *t = &c->targets[i];

                CHECK(t->name);
                CHECK(config_target_profile(c, t));
                (void) target_matches_cgroup(t, text);
                (void) target_matches_cgroup(t,
                                             "kubepods.slice/kubepods-pod1.slice/cri-containerd-ab.scope");
        }
        return 0;
}
