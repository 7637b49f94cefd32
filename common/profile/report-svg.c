/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>
#include <time.h>

#include "report.h"

/* flame.svg: a self-contained interactive flame graph, in the spirit of
 * flamegraph.pl: one box per node of the call tree, its width proportional
 * to the node's samples, the root ("all") at the bottom, callees above their
 * callers.
 *
 * The tree is all → process comm (processes with the same comm merged, as in
 * profile.folded) → frames, root first. Frames of the same name and kind
 * are one node whatever their module (as in profile.folded). Children are
 * sorted by name, so the output depends only on the profile, not on the
 * order its stacks were added in.
 *
 * Building the tree is O(total frames): a hash of (parent, label) → node.
 * Ordering the children is two counting sorts, laying out a pass over the
 * nodes in creation order (a parent is always created before its
 * children). Nodes narrower than 0.1 px are not drawn (their samples stay in
 * their parents), which bounds the file to about 12,000 boxes per level.
 *
 * Each drawn node is
 *
 *     <g class="frame" data-name="hot_alpha" data-samples="123" data-kind="user">
 *       <title>hot_alpha [app] (123 samples, 50.00%)</title>
 *       <rect x=".." y=".." width=".." height="15" fill="rgb(..)"/><text ..>label</text></g>
 *
 * in depth-first order (a parent before its children), which the script
 * uses to rebuild the tree. The script (inline, no external resources)
 * shows a node's title in the details line on hover, zooms on click
 * ("Reset zoom", Escape, or a click on "all" undo it), and searches by
 * regular expression: the "Search" button or Ctrl-F / "/" prompt for a term,
 * matches are drawn magenta and "Matched: x%" gives their share of all
 * samples (nested matches counted once). cgprofSearch(term) does the same
 * from the DOM and returns the percentage; ?s=term in the URL searches at
 * load. Numbers are formatted with integer arithmetic: no locale, no libm. */

#define SVG_WIDTH 1200
#define SVG_XPAD 10
#define SVG_FRAMES_WIDTH (SVG_WIDTH - 2 * SVG_XPAD)
#define SVG_FRAME_HEIGHT 16
#define SVG_TOP 74 /* title, subtitle, buttons */
#define SVG_BOTTOM 34 /* details line */
#define SVG_FIXED 10000 /* coordinates in 1/10000 px */
#define SVG_MIN_WIDTH_FIXED (SVG_FIXED / 10) /* 0.1 px */
#define SVG_CHAR_WIDTH_FIXED 67000 /* 6.7 px: 11 px monospace, a little generous */
#define SVG_TEXT_PAD_FIXED 30000 /* 3 px on each side of a label */

typedef enum SvgKind {
        SVG_KIND_USER, /* the same values as FrameKind */
        SVG_KIND_KERNEL,
        SVG_KIND_UNKNOWN,
        SVG_KIND_PROCESS,
        SVG_KIND_ROOT,
        SVG_KIND_CUDA, /* a CUDA kernel launched (the leaf of a launch report's stacks) */
        _SVG_KIND_MAX,
} SvgKind;

static const char *const svg_kind_table[_SVG_KIND_MAX] = {
        [SVG_KIND_USER] = "user",       [SVG_KIND_KERNEL] = "kernel", [SVG_KIND_UNKNOWN] = "unknown",
        [SVG_KIND_PROCESS] = "process", [SVG_KIND_ROOT] = "root",     [SVG_KIND_CUDA] = "cuda",
};

/* A distinct (name, kind) of the tree: nodes are keyed by (parent, label). */
typedef struct SvgLabel {
        const char *name;
        const char *module; /* of the first frame of the label in sort order, or NULL */
        SvgKind kind;
} SvgLabel;

typedef struct SvgNode {
        uint32_t parent;
        uint32_t label; /* UINT32_MAX for the root */
        uint64_t samples;
} SvgNode;

typedef struct SvgTree {
        const ProfileData *d;
        /* Labels, sorted by (name, kind): ordering children by label ID orders them by name. */
        SvgLabel *labels;
        size_t n_labels;
        uint32_t *label_of; /* the label of each frame, then of each process */

        SvgNode *nodes; /* [0] is the root */
        size_t n_nodes, allocated_nodes;
        uint32_t *slots; /* open addressing: node indices, UINT32_MAX when free */
        size_t n_slots; /* a power of two */

        /* Layout. */
        uint32_t *children; /* node indices grouped by parent, by label within */
        uint32_t *child_start; /* children of node i: children[child_start[i]..child_start[i + 1]) */
        uint64_t *offset; /* samples left of the node */
        uint32_t *depth;
        uint32_t max_depth; /* of drawn nodes */
        bool offcpu; /* an off-CPU graph: blue palette, values in µs */
        const char *usec; /* values in µs of this ("off CPU", "wall clock"); NULL: samples */
} SvgTree;

static void svg_tree_done(SvgTree *t) {
        free(t->labels);
        free(t->label_of);
        free(t->nodes);
        free(t->slots);
        free(t->children);
        free(t->child_start);
        free(t->offset);
        free(t->depth);
}

/* ---- text ---- */

/* Decodes the code point at s (NUL-terminated): its length in bytes (at
 * least 1), U+FFFD for a byte that does not start a valid sequence. */
static size_t utf8_next(const char *s, uint32_t *ret) {
        const unsigned char *u = (const unsigned char *) s;
        uint32_t c;
        size_t n;

        if (u[0] < 0x80) {
                *ret = u[0];
                return 1;
        }
        if (u[0] >= 0xc2 && u[0] <= 0xdf) {
                n = 2;
                c = u[0] & 0x1f;
        } else if (u[0] >= 0xe0 && u[0] <= 0xef) {
                n = 3;
                c = u[0] & 0x0f;
        } else if (u[0] >= 0xf0 && u[0] <= 0xf4) {
                n = 4;
                c = u[0] & 0x07;
        } else
                goto invalid;

        for (size_t i = 1; i < n; i++) {
                if ((u[i] & 0xc0) != 0x80) /* also stops at the NUL */
                        goto invalid;
                c = (c << 6) | (u[i] & 0x3f);
        }
        if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)) ||
            (c >= 0xd800 && c <= 0xdfff))
                goto invalid;

        *ret = c;
        return n;

invalid:
        *ret = 0xfffd;
        return 1;
}

static size_t utf8_length(const char *s) {
        size_t n = 0;

        for (uint32_t c; *s; n++)
                s += utf8_next(s, &c);
        return n;
}

/* Writes at most max code points of s, escaped for XML text and attribute
 * values alike. Characters XML cannot carry (C0/C1 controls other than tab,
 * newline and carriage return, U+FFFE, U+FFFF) and invalid UTF-8 become
 * U+FFFD. */
static void xml_write_n(FILE *f, const char *s, size_t max) {
        for (size_t n = 0; s && *s && n < max; n++) {
                uint32_t c;
                size_t l = utf8_next(s, &c);

                switch (c) {
                case '&':
                        fputs("&amp;", f);
                        break;
                case '<':
                        fputs("&lt;", f);
                        break;
                case '>':
                        fputs("&gt;", f);
                        break;
                case '"':
                        fputs("&quot;", f);
                        break;
                case '\'':
                        fputs("&apos;", f);
                        break;
                case '\t':
                case '\n':
                case '\r':
                        fprintf(f, "&#%" PRIu32 ";", c);
                        break;
                default:
                        if (c < 0x20 || (c >= 0x7f && c <= 0x9f) || c >= 0xfffd)
                                fputs("\xef\xbf\xbd", f);
                        else
                                fwrite(s, 1, l, f);
                }
                s += l;
        }
}

static void xml_write(FILE *f, const char *s) {
        xml_write_n(f, s, SIZE_MAX);
}

/* A fixed-point value (1/SVG_FIXED units), trailing zeros trimmed. */
static void write_fixed(FILE *f, uint64_t v) {
        unsigned frac = (unsigned) (v % SVG_FIXED);

        fprintf(f, "%" PRIu64, v / SVG_FIXED);
        if (frac == 0)
                return;
        char buf[8];
        int n = snprintf(buf, sizeof(buf), "%04u", frac);
        while (n > 0 && buf[n - 1] == '0')
                buf[--n] = 0;
        fprintf(f, ".%s", buf);
}

/* part/whole in percent with 2 decimals, rounded half up. */
static void write_percent(FILE *f, uint64_t part, uint64_t whole) {
        unsigned __int128 hundredths = 0;

        if (whole > 0)
                hundredths = ((unsigned __int128) part * 20000 + whole) / ((unsigned __int128) whole * 2);
        fprintf(f, "%" PRIu64 ".%02u", (uint64_t) (hundredths / 100), (unsigned) (hundredths % 100));
}

/* ---- the tree ---- */

static const char *label_source_name(const ProfileData *d, size_t i) {
        const char *s = i < d->n_frames ? d->frames[i].name : d->processes[i - d->n_frames].comm;
        return s && *s ? s : "[unknown]";
}

static SvgKind label_source_kind(const ProfileData *d, size_t i) {
        if (i >= d->n_frames)
                return SVG_KIND_PROCESS;
        if (streq_ptr(d->frames[i].module, PROFILE_CUDA_KERNEL_MODULE))
                return SVG_KIND_CUDA;
        switch (d->frames[i].kind) {
        case FRAME_USER:
        case FRAME_PYTHON:
                return SVG_KIND_USER;
        case FRAME_KERNEL:
                return SVG_KIND_KERNEL;
        default:
                return SVG_KIND_UNKNOWN;
        }
}

static const char *label_source_module(const ProfileData *d, size_t i) {
        return i < d->n_frames ? d->frames[i].module : NULL;
}

static int label_source_compare(const void *a, const void *b, void *userdata) {
        const ProfileData *d = userdata;
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        int r;

        r = strcmp(label_source_name(d, x), label_source_name(d, y));
        if (r != 0)
                return r;
        r = CMP(label_source_kind(d, x), label_source_kind(d, y));
        if (r != 0)
                return r;
        r = strcmp(strempty(label_source_module(d, x)), strempty(label_source_module(d, y)));
        if (r != 0)
                return r;
        return CMP(x, y);
}

static int svg_tree_labels(SvgTree *t) {
        const ProfileData *d = t->d;
        size_t n = d->n_frames + d->n_processes;
        _cleanup_free_ uint32_t *order = NULL;

        if (n >= UINT32_MAX)
                return -E2BIG;

        order = malloc(MAX(n, 1u) * sizeof(uint32_t));
        t->label_of = malloc(MAX(n, 1u) * sizeof(uint32_t));
        t->labels = malloc(MAX(n, 1u) * sizeof(SvgLabel));
        if (!order || !t->label_of || !t->labels)
                return -ENOMEM;

        for (size_t i = 0; i < n; i++)
                order[i] = (uint32_t) i;
        qsort_r(order, n, sizeof(uint32_t), label_source_compare, (void *) d);

        for (size_t i = 0; i < n; i++) {
                const char *name = label_source_name(d, order[i]);
                SvgKind kind = label_source_kind(d, order[i]);

                if (t->n_labels == 0 || kind != t->labels[t->n_labels - 1].kind ||
                    !streq(name, t->labels[t->n_labels - 1].name))
                        t->labels[t->n_labels++] = (SvgLabel){
                                .name = name,
                                .module = label_source_module(d, order[i]),
                                .kind = kind,
                        };
                t->label_of[order[i]] = (uint32_t) t->n_labels - 1;
        }
        return 0;
}

static size_t node_hash(uint32_t parent, uint32_t label) {
        uint64_t k = ((uint64_t) parent << 32 | label) * UINT64_C(0x9e3779b97f4a7c15);
        return (size_t) (k ^ (k >> 31));
}

static int svg_tree_rehash(SvgTree *t, size_t n_slots) {
        uint32_t *slots;

        slots = malloc(n_slots * sizeof(uint32_t));
        if (!slots)
                return -ENOMEM;
        memset(slots, 0xff, n_slots * sizeof(uint32_t));

        for (size_t i = 1; i < t->n_nodes; i++) {
                size_t h = node_hash(t->nodes[i].parent, t->nodes[i].label) & (n_slots - 1);

                while (slots[h] != UINT32_MAX)
                        h = (h + 1) & (n_slots - 1);
                slots[h] = (uint32_t) i;
        }
        free(t->slots);
        t->slots = slots;
        t->n_slots = n_slots;
        return 0;
}

static int svg_tree_add_node(SvgTree *t, uint32_t parent, uint32_t label, uint32_t *ret) {
        if (t->n_nodes >= UINT32_MAX - 1)
                return -E2BIG;
        if (t->n_nodes == t->allocated_nodes) {
                size_t n = MAX(t->allocated_nodes * 2, 1024u);
                SvgNode *nodes = realloc(t->nodes, n * sizeof(SvgNode));

                if (!nodes)
                        return -ENOMEM;
                t->nodes = nodes;
                t->allocated_nodes = n;
        }
        t->nodes[t->n_nodes] = (SvgNode){ .parent = parent, .label = label };
        *ret = (uint32_t) t->n_nodes++;
        return 0;
}

/* The child of parent with the label, created if new. */
static int svg_tree_child(SvgTree *t, uint32_t parent, uint32_t label, uint32_t *ret) {
        size_t h;
        int r;

        if (t->n_nodes * 2 >= t->n_slots) {
                r = svg_tree_rehash(t, MAX(t->n_slots * 2, 2048u));
                if (r < 0)
                        return r;
        }

        h = node_hash(parent, label) & (t->n_slots - 1);
        for (; t->slots[h] != UINT32_MAX; h = (h + 1) & (t->n_slots - 1)) {
                const SvgNode *n = t->nodes + t->slots[h];

                if (n->parent == parent && n->label == label) {
                        *ret = t->slots[h];
                        return 0;
                }
        }

        r = svg_tree_add_node(t, parent, label, ret);
        if (r < 0)
                return r;
        t->slots[h] = *ret;
        return 0;
}

static int svg_tree_build(SvgTree *t) {
        const ProfileData *d = t->d;
        uint32_t root;
        int r;

        r = svg_tree_labels(t);
        if (r < 0)
                return r;
        r = svg_tree_add_node(t, UINT32_MAX, UINT32_MAX, &root);
        if (r < 0)
                return r;

        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *s = d->stacks + i;
                uint32_t node;

                if (s->count == 0)
                        continue;
                if (s->process >= d->n_processes || (s->n_frames > 0 && !s->frames))
                        return -EINVAL;

                t->nodes[root].samples += s->count;
                r = svg_tree_child(t, root, t->label_of[d->n_frames + s->process], &node);
                if (r < 0)
                        return r;
                t->nodes[node].samples += s->count;

                for (size_t k = 0; k < s->n_frames; k++) {
                        if (s->frames[k] >= d->n_frames)
                                return -EINVAL;
                        r = svg_tree_child(t, node, t->label_of[s->frames[k]], &node);
                        if (r < 0)
                                return r;
                        t->nodes[node].samples += s->count;
                }
        }
        return 0;
}

static uint64_t x_fixed(const SvgTree *t, uint64_t samples) {
        uint64_t total = t->nodes[0].samples;

        return (uint64_t) (((unsigned __int128) samples * SVG_FRAMES_WIDTH * SVG_FIXED + total / 2) / total);
}

static bool svg_tree_drawn(const SvgTree *t, uint32_t i) {
        uint64_t total = t->nodes[0].samples;

        /* At least 0.1 px wide. */
        return total > 0 && (unsigned __int128) t->nodes[i].samples * SVG_FRAMES_WIDTH * SVG_FIXED >=
                                    (unsigned __int128) SVG_MIN_WIDTH_FIXED * total;
}

static int svg_tree_layout(SvgTree *t) {
        size_t n = t->n_nodes;
        _cleanup_free_ uint32_t *by_label = NULL, *pos = NULL;

        by_label = malloc(n * sizeof(uint32_t));
        pos = calloc(MAX(t->n_labels, n) + 1, sizeof(uint32_t));
        t->children = malloc(n * sizeof(uint32_t));
        t->child_start = calloc(n + 1, sizeof(uint32_t));
        t->offset = calloc(n, sizeof(uint64_t));
        t->depth = calloc(n, sizeof(uint32_t));
        if (!by_label || !pos || !t->children || !t->child_start || !t->offset || !t->depth)
                return -ENOMEM;

        /* Counting sort of the non-root nodes by label... */
        for (size_t i = 1; i < n; i++)
                pos[t->nodes[i].label + 1]++;
        for (size_t l = 0; l < t->n_labels; l++)
                pos[l + 1] += pos[l];
        for (size_t i = 1; i < n; i++)
                by_label[pos[t->nodes[i].label]++] = (uint32_t) i;

        /* ... then a stable one by parent: the children of each node, by name. */
        for (size_t i = 1; i < n; i++)
                t->child_start[t->nodes[i].parent + 1]++;
        for (size_t i = 0; i < n; i++)
                t->child_start[i + 1] += t->child_start[i];
        memcpy(pos, t->child_start, n * sizeof(uint32_t));
        for (size_t i = 0; i + 1 < n; i++) {
                uint32_t c = by_label[i];
                t->children[pos[t->nodes[c].parent]++] = c;
        }

        /* A parent is created before its children: one pass in index order. */
        t->max_depth = 0;
        for (size_t i = 0; i < n; i++) {
                uint64_t x = t->offset[i];

                for (uint32_t k = t->child_start[i]; k < t->child_start[i + 1]; k++) {
                        uint32_t c = t->children[k];

                        t->offset[c] = x;
                        x += t->nodes[c].samples;
                        t->depth[c] = t->depth[i] + 1;
                        if (svg_tree_drawn(t, c))
                                t->max_depth = MAX(t->max_depth, t->depth[c]);
                }
        }
        return 0;
}

/* ---- output ---- */

static uint32_t name_hash(const char *s) {
        uint32_t h = 2166136261u; /* FNV-1a */

        for (; *s; s++)
                h = (h ^ (unsigned char) *s) * 16777619u;
        /* Mix, so that names differing in their last byte differ everywhere. */
        h ^= h >> 15;
        h *= 0x2c1b3c6du;
        h ^= h >> 12;
        return h;
}

static void write_fill(FILE *f, const char *name, SvgKind kind, bool offcpu) {
        uint32_t h = name_hash(name);
        unsigned v1 = h & 0xff, v2 = (h >> 8) & 0xff, v3 = (h >> 16) & 0xff, r, g, b;

        if (offcpu && kind != SVG_KIND_UNKNOWN && kind != SVG_KIND_PROCESS) {
                /* Off-CPU graphs in blues (as Brendan Gregg draws them):
                 * user code light to mid blue, the kernel's deeper. */
                unsigned deep = kind == SVG_KIND_KERNEL ? 60 : 0;
                r = 40 + 60 * v1 / 255 - deep / 2;
                g = 110 + 80 * v2 / 255 - deep;
                b = 225 + 30 * v3 / 255;
                fprintf(f, "rgb(%u,%u,%u)", r, g, b);
                return;
        }
        switch (kind) {
        case SVG_KIND_USER: /* warm: red to yellow */
                r = 205 + 50 * v3 / 255;
                g = 230 * v1 / 255;
                b = 55 * v2 / 255;
                break;
        case SVG_KIND_KERNEL: /* aqua to blue */
                r = 50 + 60 * v1 / 255;
                g = 150 + 70 * v2 / 255;
                b = 200 + 55 * v3 / 255;
                break;
        case SVG_KIND_UNKNOWN: /* grey */
                r = g = b = 160 + 50 * v1 / 255;
                break;
        case SVG_KIND_PROCESS: /* violet */
                r = 170 + 40 * v1 / 255;
                g = 140 + 40 * v2 / 255;
                b = 215 + 40 * v3 / 255;
                break;
        case SVG_KIND_CUDA: /* green */
                r = 40 + 70 * v1 / 255;
                g = 170 + 60 * v2 / 255;
                b = 40 + 60 * v3 / 255;
                break;
        default:
                r = 220, g = 220, b = 205;
        }
        fprintf(f, "rgb(%u,%u,%u)", r, g, b);
}

static void write_title(FILE *f, const char *name, const char *module, SvgKind kind, uint64_t samples,
                        uint64_t total, const char *usec) {
        xml_write(f, name);
        switch (kind) {
        case SVG_KIND_USER:
                if (module) {
                        fputs(" [", f);
                        xml_write(f, module);
                        fputc(']', f);
                }
                break;
        case SVG_KIND_KERNEL:
                fputs(" [kernel]", f);
                break;
        case SVG_KIND_PROCESS:
                fputs(" [process]", f);
                break;
        case SVG_KIND_CUDA:
                fputs(" [cuda kernel]", f);
                break;
        default:
                break;
        }
        if (usec)
                fprintf(f, " (%" PRIu64 " \u00b5s %s, ", samples, usec);
        else
                fprintf(f, " (%" PRIu64 " sample%s, ", samples, samples == 1 ? "" : "s");
        write_percent(f, samples, total);
        fputs("%)", f);
}

static void write_frame(FILE *f, const SvgTree *t, uint32_t i) {
        const SvgNode *n = t->nodes + i;
        const SvgLabel *l = n->label == UINT32_MAX ? NULL : t->labels + n->label;
        const char *name = l ? l->name : "all";
        SvgKind kind = l ? l->kind : SVG_KIND_ROOT;
        uint64_t x = x_fixed(t, t->offset[i]), w = x_fixed(t, t->offset[i] + n->samples) - x;
        uint64_t y = SVG_TOP + (uint64_t) (t->max_depth - t->depth[i]) * SVG_FRAME_HEIGHT;
        uint64_t chars =
                w > 2 * SVG_TEXT_PAD_FIXED ? (w - 2 * SVG_TEXT_PAD_FIXED) / SVG_CHAR_WIDTH_FIXED : 0;

        fputs("<g class=\"frame\" data-name=\"", f);
        xml_write(f, name);
        fprintf(f, "\" data-samples=\"%" PRIu64 "\" data-kind=\"%s\"><title>", n->samples,
                svg_kind_table[kind]);
        write_title(f, name, l ? l->module : NULL, kind, n->samples, t->nodes[0].samples, t->usec);
        fputs("</title><rect x=\"", f);
        write_fixed(f, SVG_XPAD * SVG_FIXED + x);
        fprintf(f, "\" y=\"%" PRIu64 "\" width=\"", y);
        write_fixed(f, w);
        fprintf(f, "\" height=\"%u\" fill=\"", SVG_FRAME_HEIGHT - 1);
        write_fill(f, name, kind, t->offcpu);
        fputs("\"/>", f);

        /* A label where 3 characters fit: the name, or its start and "..". */
        if (chars >= 3) {
                size_t len = utf8_length(name);

                fputs("<text x=\"", f);
                write_fixed(f, SVG_XPAD * SVG_FIXED + x + SVG_TEXT_PAD_FIXED);
                fprintf(f, "\" y=\"%" PRIu64 "\">", y + 11);
                if (len <= chars)
                        xml_write(f, name);
                else {
                        xml_write_n(f, name, chars - 2);
                        fputs("..", f);
                }
                fputs("</text>", f);
        }
        fputs("</g>\n", f);
}

/* Depth first, children by name: a parent before its children. */
static int write_frames(FILE *f, const SvgTree *t) {
        _cleanup_free_ uint32_t *stack = NULL;
        size_t n = 0;

        if (t->nodes[0].samples == 0)
                return 0;

        stack = malloc(t->n_nodes * sizeof(uint32_t));
        if (!stack)
                return -ENOMEM;

        stack[n++] = 0;
        while (n > 0) {
                uint32_t i = stack[--n];

                write_frame(f, t, i);
                for (uint32_t k = t->child_start[i + 1]; k > t->child_start[i]; k--)
                        if (svg_tree_drawn(t, t->children[k - 1]))
                                stack[n++] = t->children[k - 1];
                if (ferror(f))
                        return -EIO;
        }
        return 0;
}

static const char svg_style[] =
        "text { font-family: monospace; font-size: 11px; fill: #000; }\n"
        ".cg-title { font-family: sans-serif; font-size: 17px; text-anchor: middle; }\n"
        ".cg-subtitle { font-family: sans-serif; font-size: 12px; text-anchor: middle; fill: #444; }\n"
        ".cg-info, .cg-legend text { font-family: sans-serif; font-size: 12px; }\n"
        ".cg-button { font-family: sans-serif; font-size: 12px; font-weight: bold; fill: #1c58a8; cursor: "
        "pointer; }\n"
        ".cg-button:hover { text-decoration: underline; }\n"
        ".cg-hide { display: none; }\n"
        "g.frame { cursor: pointer; }\n"
        "g.frame > text { pointer-events: none; }\n"
        "g.frame:hover > rect { stroke: #000; stroke-width: 0.5; }\n"
        "g.frame.cg-parent > rect { fill-opacity: 0.5; }\n"
        "g.frame.cg-match > rect { fill: rgb(230,0,230); }\n";

static const char svg_script[] =
        "(function () {\n"
        "    \"use strict\";\n"
        "    var C = cgprofConfig;\n"
        "    var frames = null, zoomed = null, term = null, charWidth = C.charWidth, hint = \"\";\n"
        "    var details, matched, searchButton, unzoomButton;\n"
        "\n"
        "    /* Rebuilds the tree from the frames, which are in depth-first order:\n"
        "    * the parent of a frame is the last one before it a level lower, and\n"
        "    * a frame's subtree ends at the next frame at its level or lower. */\n"
        "    function init() {\n"
        "        if (frames)\n"
        "            return;\n"
        "        frames = [];\n"
        "        details = document.getElementById(\"cg-details\");\n"
        "        matched = document.getElementById(\"cg-matched\");\n"
        "        searchButton = document.getElementById(\"cg-search\");\n"
        "        unzoomButton = document.getElementById(\"cg-unzoom\");\n"
        "        hint = details.textContent;\n"
        "        var gs = document.getElementById(\"cg-frames\").children, stack = [];\n"
        "        for (var i = 0; i < gs.length; i++) {\n"
        "            var g = gs[i], r = g.getElementsByTagName(\"rect\")[0];\n"
        "            var f = {\n"
        "                i: i,\n"
        "                g: g,\n"
        "                rect: r,\n"
        "                text: g.getElementsByTagName(\"text\")[0] || null,\n"
        "                name: g.getAttribute(\"data-name\"),\n"
        "                samples: Number(g.getAttribute(\"data-samples\")),\n"
        "                x: Number(r.getAttribute(\"x\")),\n"
        "                w: Number(r.getAttribute(\"width\")),\n"
        "                y: Number(r.getAttribute(\"y\")),\n"
        "                parent: -1,\n"
        "                end: gs.length\n"
        "            };\n"
        "            f.depth = Math.round((C.base - f.y) / C.frameHeight);\n"
        "            while (stack.length > 0 && frames[stack[stack.length - 1]].depth >= f.depth)\n"
        "                frames[stack.pop()].end = i;\n"
        "            if (stack.length > 0)\n"
        "                f.parent = stack[stack.length - 1];\n"
        "            stack.push(i);\n"
        "            g.cgprofIndex = i;\n"
        "            frames.push(f);\n"
        "        }\n"
        "        measure();\n"
        "    }\n"
        "\n"
        "    /* The labels were cut for an estimated character width: measure it. */\n"
        "    function measure() {\n"
        "        for (var i = 0; i < frames.length; i++) {\n"
        "            var t = frames[i].text, n = t ? t.textContent.length : 0;\n"
        "            if (n < 4 || !t.getComputedTextLength)\n"
        "                continue;\n"
        "            var w = t.getComputedTextLength() / n;\n"
        "            if (w > 1 && w < 40 && Math.abs(w - charWidth) > 0.05) {\n"
        "                charWidth = w;\n"
        "                for (var j = 0; j < frames.length; j++)\n"
        "                    label(frames[j], frames[j].x, frames[j].w);\n"
        "            }\n"
        "            return;\n"
        "        }\n"
        "    }\n"
        "\n"
        "    function frameOf(e) {\n"
        "        for (; e && e.classList; e = e.parentNode)\n"
        "            if (e.classList.contains(\"frame\"))\n"
        "                return frames[e.cgprofIndex];\n"
        "        return null;\n"
        "    }\n"
        "\n"
        "    function label(f, x, w) {\n"
        "        var n = Math.floor((w - 6) / charWidth), s = \"\";\n"
        "        if (n >= 3)\n"
        "            s = f.name.length <= n ? f.name : f.name.substring(0, n - 2) + \"..\";\n"
        "        if (!f.text) {\n"
        "            if (s === \"\")\n"
        "                return;\n"
        "            f.text = document.createElementNS(f.rect.namespaceURI, \"text\");\n"
        "            f.text.setAttribute(\"y\", f.y + C.textDy);\n"
        "            f.g.appendChild(f.text);\n"
        "        }\n"
        "        f.text.setAttribute(\"x\", (x + 3).toFixed(2));\n"
        "        f.text.textContent = s;\n"
        "    }\n"
        "\n"
        "    function place(f, x, w, parent) {\n"
        "        f.g.classList.remove(\"cg-hide\");\n"
        "        f.g.classList.toggle(\"cg-parent\", parent);\n"
        "        f.rect.setAttribute(\"x\", x.toFixed(4));\n"
        "        f.rect.setAttribute(\"width\", w.toFixed(4));\n"
        "        label(f, x, w);\n"
        "    }\n"
        "\n"
        "    function unzoom() {\n"
        "        init();\n"
        "        if (!zoomed)\n"
        "            return;\n"
        "        for (var j = 0; j < frames.length; j++)\n"
        "            place(frames[j], frames[j].x, frames[j].w, false);\n"
        "        zoomed = null;\n"
        "        unzoomButton.classList.add(\"cg-hide\");\n"
        "    }\n"
        "\n"
        "    /* f and its callees fill the width, its callers are drawn faded\n"
        "    * across it, everything else is hidden. */\n"
        "    function zoom(f) {\n"
        "        init();\n"
        "        if (!f || f.i === 0) {\n"
        "            unzoom();\n"
        "            return;\n"
        "        }\n"
        "        var ratio = C.width / f.w;\n"
        "        for (var j = 0; j < frames.length; j++) {\n"
        "            var g = frames[j];\n"
        "            if (j >= f.i && j < f.end)\n"
        "                place(g, C.xpad + (g.x - f.x) * ratio, g.w * ratio, false);\n"
        "            else if (j < f.i && f.i < g.end)\n"
        "                place(g, C.xpad, C.width, true);\n"
        "            else\n"
        "                g.g.classList.add(\"cg-hide\");\n"
        "        }\n"
        "        zoomed = f;\n"
        "        unzoomButton.classList.remove(\"cg-hide\");\n"
        "    }\n"
        "\n"
        "    function escapeRegExp(s) {\n"
        "        var bs = String.fromCharCode(92), special = \"^$.*+?()[]{}|/\" + bs, out = \"\";\n"
        "        for (var i = 0; i < s.length; i++)\n"
        "            out += (special.indexOf(s.charAt(i)) >= 0 ? bs : \"\") + s.charAt(i);\n"
        "        return out;\n"
        "    }\n"
        "\n"
        "    function resetSearch() {\n"
        "        init();\n"
        "        for (var j = 0; j < frames.length; j++)\n"
        "            frames[j].g.classList.remove(\"cg-match\");\n"
        "        term = null;\n"
        "        matched.classList.add(\"cg-hide\");\n"
        "        searchButton.textContent = \"Search\";\n"
        "    }\n"
        "\n"
        "    /* Highlights the frames whose name matches the regular expression (or\n"
        "    * the text, when it is not one) and returns their share of all\n"
        "    * samples in percent, a match inside a match counted once. */\n"
        "    function search(t) {\n"
        "        init();\n"
        "        if (t === undefined || t === null || String(t) === \"\") {\n"
        "            resetSearch();\n"
        "            return 0;\n"
        "        }\n"
        "        t = String(t);\n"
        "        var re;\n"
        "        try {\n"
        "            re = new RegExp(t);\n"
        "        } catch (e) {\n"
        "            re = new RegExp(escapeRegExp(t));\n"
        "        }\n"
        "        var covered = new Uint8Array(frames.length), sum = 0;\n"
        "        for (var j = 0; j < frames.length; j++) {\n"
        "            var f = frames[j], m = j > 0 && re.test(f.name);\n"
        "            var inside = f.parent >= 0 && covered[f.parent] === 1;\n"
        "            f.g.classList.toggle(\"cg-match\", m);\n"
        "            covered[j] = m || inside ? 1 : 0;\n"
        "            if (m && !inside)\n"
        "                sum += f.samples;\n"
        "        }\n"
        "        var pct = C.total > 0 ? (100 * sum) / C.total : 0;\n"
        "        term = t;\n"
        "        matched.textContent = \"Matched: \" + pct.toFixed(2) + \"% (\" + sum + \" of \" + C.total "
        "+ \" samples)\";\n"
        "        matched.classList.remove(\"cg-hide\");\n"
        "        searchButton.textContent = \"Reset search\";\n"
        "        return pct;\n"
        "    }\n"
        "\n"
        "    function promptSearch() {\n"
        "        var t = window.prompt(\"Search frames (regular expression):\", term || \"\");\n"
        "        if (t !== null)\n"
        "            search(t);\n"
        "    }\n"
        "\n"
        "    /* Zooms to the widest frame of that name; false if there is none. */\n"
        "    function zoomTo(name) {\n"
        "        init();\n"
        "        var best = null;\n"
        "        for (var j = 0; j < frames.length; j++)\n"
        "            if (frames[j].name === name && (!best || frames[j].samples > best.samples))\n"
        "                best = frames[j];\n"
        "        if (best)\n"
        "            zoom(best);\n"
        "        return best !== null;\n"
        "    }\n"
        "\n"
        "    function setup() {\n"
        "        init();\n"
        "        var box = document.getElementById(\"cg-frames\");\n"
        "        box.addEventListener(\"mouseover\", function (e) {\n"
        "            var f = frameOf(e.target);\n"
        "            if (f)\n"
        "                details.textContent = f.g.getElementsByTagName(\"title\")[0].textContent;\n"
        "        });\n"
        "        box.addEventListener(\"mouseout\", function () {\n"
        "            details.textContent = hint;\n"
        "        });\n"
        "        box.addEventListener(\"click\", function (e) {\n"
        "            var f = frameOf(e.target);\n"
        "            if (f)\n"
        "                zoom(f);\n"
        "        });\n"
        "        unzoomButton.addEventListener(\"click\", unzoom);\n"
        "        searchButton.addEventListener(\"click\", function () {\n"
        "            if (term !== null)\n"
        "                resetSearch();\n"
        "            else\n"
        "                promptSearch();\n"
        "        });\n"
        "        window.addEventListener(\"keydown\", function (e) {\n"
        "            if (e.key === \"F3\" || e.key === \"/\" || ((e.ctrlKey || e.metaKey) && (e.key === "
        "\"f\" || e.key === \"F\"))) {\n"
        "                e.preventDefault();\n"
        "                promptSearch();\n"
        "            } else if (e.key === \"Escape\") {\n"
        "                unzoom();\n"
        "                resetSearch();\n"
        "            }\n"
        "        });\n"
        "        var s = window.URLSearchParams ? new URLSearchParams(window.location.search).get(\"s\") : "
        "null;\n"
        "        if (s)\n"
        "            search(s);\n"
        "    }\n"
        "\n"
        "    window.cgprofSearch = search;\n"
        "    window.cgprofResetSearch = resetSearch;\n"
        "    window.cgprofZoom = zoomTo;\n"
        "    window.cgprofUnzoom = unzoom;\n"
        "    setup();\n"
        "})();\n";

static void write_target(FILE *f, const ReportSummaryInfo *info) {
        if (info && info->pod) {
                if (info->namespace) {
                        xml_write(f, info->namespace);
                        fputc('/', f);
                }
                xml_write(f, info->pod);
                if (info->container) {
                        fputc('/', f);
                        xml_write(f, info->container);
                }
        } else if (info && info->cgroup)
                xml_write(f, *info->cgroup ? info->cgroup : "/");
        else if (info && info->target)
                xml_write(f, info->target);
        else
                fputs("cgprof profile", f);
}

static void write_separator(FILE *f, bool *first) {
        if (!*first)
                fputs(" \xc2\xb7 ", f); /* U+00B7 MIDDLE DOT */
        *first = false;
}

/* One "label value" part of the subtitle, if there is a value. */
static void write_labelled(FILE *f, bool *first, const char *label, const char *value) {
        if (!value)
                return;
        write_separator(f, first);
        fputs(label, f);
        xml_write(f, value);
}

static int rank_compare(const void *a, const void *b) {
        return CMP(*(const int32_t *) a, *(const int32_t *) b);
}

/* The distributed job's ranks the processes have (job-identity.h):
 * "rank 1", "ranks 0, 1 of 2", at most 8 listed, and the run's ID. */
static void write_ranks(FILE *f, bool *first, const ProfileData *d) {
        int32_t ranks[9], world = -1;
        const char *run_id = NULL;
        size_t n = 0;
        bool more = false;

        for (size_t i = 0; d && i < d->n_processes; i++) {
                const JobIdentity *j = &d->processes[i].job;
                bool seen = false;

                if (j->rank < 0 || d->processes[i].samples == 0)
                        continue;
                world = MAX(world, j->world_size);
                if (j->run_id[0])
                        run_id = j->run_id;
                for (size_t k = 0; k < n && !seen; k++)
                        seen = ranks[k] == j->rank;
                if (seen)
                        continue;
                if (n < 8)
                        ranks[n++] = j->rank;
                else
                        more = true;
        }
        if (n == 0)
                return;
        qsort(ranks, n, sizeof(int32_t), rank_compare);
        write_separator(f, first);
        fputs(n > 1 ? "ranks " : "rank ", f);
        for (size_t k = 0; k < n; k++)
                fprintf(f, "%s%" PRIi32, k > 0 ? ", " : "", ranks[k]);
        if (more)
                fputs(", \xe2\x80\xa6", f); /* U+2026 HORIZONTAL ELLIPSIS */
        if (world > 0)
                fprintf(f, " of %" PRIi32, world);
        if (run_id) {
                fputs(" (run ", f);
                xml_write(f, run_id);
                fputc(')', f);
        }
}

static void write_subtitle(FILE *f, const ReportSummaryInfo *info, const ProfileData *d, uint64_t total,
                           const char *usec) {
        bool first = true;

        if (info) {
                write_labelled(f, &first, "session ", info->session_id);
                write_labelled(f, &first, "target ", info->target);
                write_labelled(f, &first, "cgroup ", info->pod ? info->cgroup : NULL);
                write_labelled(f, &first, "profile ", info->profile);
        }
        write_ranks(f, &first, d);
        if (info && (info->event || info->frequency > 0)) {
                write_separator(f, &first);
                xml_write(f, info->event ?: "samples");
                if (info->frequency > 0)
                        fprintf(f, " at %" PRIu64 " Hz", info->frequency);
        }
        write_separator(f, &first);
        if (usec)
                fprintf(f, "%s: %" PRIu64 " \u00b5s", usec, total);
        else
                fprintf(f, "%" PRIu64 " sample%s", total, total == 1 ? "" : "s");
        if (info && info->end_usec > info->start_usec && info->start_usec > 0) {
                uint64_t tenths =
                        (info->end_usec - info->start_usec + USEC_PER_SEC / 20) / (USEC_PER_SEC / 10);
                time_t sec = (time_t) (info->start_usec / USEC_PER_SEC);
                struct tm tm;
                char buf[32];

                write_separator(f, &first);
                fprintf(f, "%" PRIu64 ".%u s", tenths / 10, (unsigned) (tenths % 10));
                if (gmtime_r(&sec, &tm) && strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm) > 0)
                        fprintf(f, " from %s", buf);
        }
        if (info)
                write_labelled(f, &first, "node ", info->node);
}

static void write_header(FILE *f, const SvgTree *t, const ReportSummaryInfo *info, uint64_t height) {
        static const struct {
                const char *label, *fill;
        } legend[] = {
                { "user", "rgb(230,115,28)" },
                { "kernel", "rgb(80,185,228)" },
                { "unknown", "rgb(185,185,185)" },
                { "process", "rgb(190,160,235)" },
        };
        const char *session = info ? info->session_id : NULL;

        fputs("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n", f);
        fprintf(f,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%u\" height=\"%" PRIu64
                "\" viewBox=\"0 0 %u %" PRIu64 "\" data-total=\"%" PRIu64 "\"",
                SVG_WIDTH, height, SVG_WIDTH, height, t->nodes[0].samples);
        if (session) {
                fputs(" data-session=\"", f);
                xml_write(f, session);
                fputc('"', f);
        }
        fputs(">\n<title>Flame graph: ", f);
        write_target(f, info);
        if (session) {
                fputs(" (session ", f);
                xml_write(f, session);
                fputc(')', f);
        }
        fputs("</title>\n", f);

        fprintf(f, "<style>\n%s</style>\n", svg_style);
        fputs("<defs><linearGradient id=\"cg-background\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\">"
              "<stop offset=\"5%\" stop-color=\"#eeeeee\"/><stop offset=\"95%\" stop-color=\"#eeeeb0\"/>"
              "</linearGradient></defs>\n",
              f);
        fprintf(f,
                "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%" PRIu64 "\" fill=\"url(#cg-background)\"/>\n",
                SVG_WIDTH, height);

        fprintf(f, "<text class=\"cg-title\" x=\"%u\" y=\"24\">Flame graph: ", SVG_WIDTH / 2);
        write_target(f, info);
        fprintf(f, "</text>\n<text class=\"cg-subtitle\" x=\"%u\" y=\"42\">", SVG_WIDTH / 2);
        write_subtitle(f, info, t->d, t->nodes[0].samples, t->usec);
        fputs("</text>\n", f);

        fprintf(f,
                "<text id=\"cg-unzoom\" class=\"cg-button cg-hide\" x=\"%u\" y=\"64\">Reset zoom</text>\n",
                SVG_XPAD);
        fprintf(f,
                "<text id=\"cg-search\" class=\"cg-button\" x=\"%u\" y=\"64\" text-anchor=\"end\">"
                "Search</text>\n",
                SVG_WIDTH - SVG_XPAD);
        fputs("<g class=\"cg-legend\">", f);
        for (size_t i = 0; i < ELEMENTSOF(legend); i++) {
                unsigned x = SVG_WIDTH / 2 - 160 + 80 * (unsigned) i;

                fprintf(f,
                        "<rect x=\"%u\" y=\"54\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                        "<text x=\"%u\" y=\"64\">%s</text>",
                        x, legend[i].fill, x + 16, legend[i].label);
        }
        fputs("</g>\n", f);
}

static void write_footer(FILE *f, const SvgTree *t, uint64_t height) {
        fprintf(f,
                "<text id=\"cg-details\" class=\"cg-info\" x=\"%u\" y=\"%" PRIu64 "\">"
                "Click a frame to zoom in, Ctrl-F or Search to search.</text>\n",
                SVG_XPAD, height - 12);
        fprintf(f,
                "<text id=\"cg-matched\" class=\"cg-info cg-hide\" x=\"%u\" y=\"%" PRIu64
                "\" text-anchor=\"end\"> </text>\n",
                SVG_WIDTH - SVG_XPAD, height - 12);
        fputs("<script type=\"text/ecmascript\"><![CDATA[\n", f);
        fprintf(f,
                "var cgprofConfig = { xpad: %u, width: %u, frameHeight: %u, base: %" PRIu64
                ", textDy: 11, charWidth: %u.%u, total: %" PRIu64 " };\n",
                SVG_XPAD, SVG_FRAMES_WIDTH, SVG_FRAME_HEIGHT,
                SVG_TOP + (uint64_t) t->max_depth * SVG_FRAME_HEIGHT, SVG_CHAR_WIDTH_FIXED / SVG_FIXED,
                (SVG_CHAR_WIDTH_FIXED % SVG_FIXED) / (SVG_FIXED / 10), t->nodes[0].samples);
        fputs(svg_script, f);
        fputs("]]></script>\n", f);
}

static int svg_write(FILE *f, const ProfileData *d, const ReportSummaryInfo *info, bool offcpu,
                     const char *usec);

int report_write_svg(FILE *f, const ProfileData *d, const ReportSummaryInfo *info) {
        return report_write_svg_full(f, d, info, false);
}

int report_write_svg_offcpu(FILE *f, const ProfileData *d, const ReportSummaryInfo *info) {
        return report_write_svg_full(f, d, info, true);
}

int report_write_svg_wallclock(FILE *f, const ProfileData *d, const ReportSummaryInfo *info) {
        return svg_write(f, d, info, false, "wall clock");
}

int report_write_svg_full(FILE *f, const ProfileData *d, const ReportSummaryInfo *info, bool offcpu) {
        return svg_write(f, d, info, offcpu, offcpu ? "off CPU" : NULL);
}

static int svg_write(FILE *f, const ProfileData *d, const ReportSummaryInfo *info, bool offcpu,
                     const char *usec) {
        _cleanup_(svg_tree_done) SvgTree t = { .d = d, .offcpu = offcpu, .usec = usec };
        uint64_t height;
        int r;

        if (!f || !d)
                return -EINVAL;

        r = svg_tree_build(&t);
        if (r < 0)
                return r;
        r = svg_tree_layout(&t);
        if (r < 0)
                return r;

        height = SVG_TOP + (uint64_t) (t.max_depth + 1) * SVG_FRAME_HEIGHT + SVG_BOTTOM;
        write_header(f, &t, info, height);

        fputs("<g id=\"cg-frames\">\n", f);
        r = write_frames(f, &t);
        if (r < 0)
                return r;
        fputs("</g>\n", f);
        if (t.nodes[0].samples == 0)
                fprintf(f,
                        "<text class=\"cg-info\" x=\"%u\" y=\"%u\" text-anchor=\"middle\">No "
                        "samples</text>\n",
                        SVG_WIDTH / 2, SVG_TOP + 11);

        write_footer(f, &t, height);
        fputs("</svg>\n", f);
        return ferror(f) ? -EIO : 0;
}
