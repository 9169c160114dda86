// diskcanary's Prometheus rules and Grafana dashboards as a monitoring mixin
// (https://monitoring.mixins.dev), for kube-prometheus and other jsonnet
// set-ups:
//
//   jb install github.com/diskcanary/diskcanary/mixin@main
//
//   local diskcanary = (import 'github.com/diskcanary/diskcanary/mixin/mixin.libsonnet') + {
//     _config+:: { alertLabels: { team: 'storage' } },
//   };
//   diskcanary.prometheusRules.groups + diskcanary.prometheusAlerts.groups  // one rule file
//   diskcanary.grafanaDashboards                                          // file name -> dashboard
//
// The rules and dashboards are not written here: tools/rulegen (Go) writes
// them into generated/ — the same rules as alerts/diskcanary-rules.yml, the
// same dashboards as dashboards/ — and this file only sorts them into the
// mixin's fields and applies _config. Everything inside a PromQL expression
// (thresholds, for: durations, sample floors, the job and etcd selectors,
// the target and cluster labels, cohorts) is a flag of the generator, where
// the promtool unit tests pin it:
//
//   go run -C tools/rulegen ./cmd/rulegen -help
//   go run -C tools/rulegen ./cmd/rulegen -fdatasync.slow 25ms   # rewrites generated/ too
local generatedDashboards = import 'generated/dashboards.libsonnet';
local generatedRules = import 'generated/diskcanary-rules.json';

local isRecordingGroup(g) = std.all([std.objectHas(r, 'record') for r in g.rules]);

{
  _config+:: {
    // Labels added to every alert, e.g. { team: 'storage' }. The alert's own
    // labels (severity) win on a clash. Recording rules are left alone:
    // a label there would change the series the alerts read.
    alertLabels: {},
    // Replaces the part of every runbook_url before '#' (the generated one
    // is this repository's docs/runbooks.md), e.g. your wiki's copy of it.
    // null keeps the generated URLs.
    runbookURLBase: null,
    // Dashboard settings; null keeps what the generator wrote
    // (tags ['diskcanary'], refresh '1m', timezone 'browser').
    dashboardTags: null,
    dashboardRefresh: null,
    dashboardTimezone: null,
  },

  local c = self._config,

  local withRunbookBase(url) =
    local hash = std.findSubstr('#', url);
    if c.runbookURLBase == null || std.length(hash) == 0 then url
    else c.runbookURLBase + std.substr(url, hash[0], std.length(url) - hash[0]),

  local alert(r) = r {
    [if std.length(c.alertLabels) > 0 then 'labels']:
      c.alertLabels + (if std.objectHas(r, 'labels') then r.labels else {}),
    [if std.objectHas(r, 'annotations') && std.objectHas(r.annotations, 'runbook_url') then 'annotations']+: {
      runbook_url: withRunbookBase(r.annotations.runbook_url),
    },
  },

  prometheusRules+:: {
    groups+: [g for g in generatedRules.groups if isRecordingGroup(g)],
  },

  prometheusAlerts+:: {
    groups+: [
      g { rules: [if std.objectHas(r, 'alert') then alert(r) else r for r in g.rules] }
      for g in generatedRules.groups
      if !isRecordingGroup(g)
    ],
  },

  grafanaDashboards+:: {
    [name]: generatedDashboards[name] {
      [if c.dashboardTags != null then 'tags']: c.dashboardTags,
      [if c.dashboardRefresh != null then 'refresh']: c.dashboardRefresh,
      [if c.dashboardTimezone != null then 'timezone']: c.dashboardTimezone,
    }
    for name in std.objectFields(generatedDashboards)
  },
}
