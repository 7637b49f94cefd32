/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "report-format.h"

static const char *const report_format_table[_REPORT_FORMAT_MAX] = {
        [REPORT_FORMAT_FOLDED] = "folded",         [REPORT_FORMAT_JSON] = "json",
        [REPORT_FORMAT_PPROF] = "pprof",           [REPORT_FORMAT_SVG] = "svg",
        [REPORT_FORMAT_SPEEDSCOPE] = "speedscope",
};

const char *report_format_to_string(ReportFormat f) {
        if (f < 0 || f >= _REPORT_FORMAT_MAX)
                return NULL;
        return report_format_table[f];
}

ReportFormat report_format_from_string(const char *s) {
        if (!s)
                return _REPORT_FORMAT_INVALID;
        for (ReportFormat f = 0; f < _REPORT_FORMAT_MAX; f++)
                if (streq(s, report_format_table[f]))
                        return f;
        return _REPORT_FORMAT_INVALID;
}
