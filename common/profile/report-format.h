/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* The report formats, by the names a profile's "formats" and cgprofctl use.
 * Here rather than in config.h, so that the report writers need no config. */
typedef enum ReportFormat {
        REPORT_FORMAT_FOLDED, /* profile.folded */
        REPORT_FORMAT_JSON, /* summary.json */
        REPORT_FORMAT_PPROF, /* profile.pb.gz */
        REPORT_FORMAT_SVG, /* flame.svg */
        REPORT_FORMAT_SPEEDSCOPE, /* profile.speedscope.json */
        _REPORT_FORMAT_MAX,
        _REPORT_FORMAT_INVALID = -EINVAL,
} ReportFormat;

const char *report_format_to_string(ReportFormat f);
ReportFormat report_format_from_string(const char *s);
