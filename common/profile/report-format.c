/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "report-format.h"

static const char *const report_format_table[_REPORT_FORMAT_MAX] = {
        [REPORT_FORMAT_FOLDED] = "folded",         [REPORT_FORMAT_JSON] = "json",
        [REPORT_FORMAT_PPROF] = "pprof",           [REPORT_FORMAT_SVG] = "svg",
        [REPORT_FORMAT_SPEEDSCOPE] = "speedscope",
};

DEFINE_STRING_TABLE_LOOKUP(report_format, ReportFormat, _REPORT_FORMAT_MAX, _REPORT_FORMAT_INVALID);
