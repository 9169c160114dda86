// diskcanary's Prometheus rules and Grafana dashboards as a monitoring mixin
// (https://monitoring.mixins.dev), for kube-prometheus and other jsonnet
// set-ups:
//
//   jb install github.com/diskcanary/diskcanary/mixin@main
//
//   local diskcanary = (import 'github.com/diskcanary/diskcanary/mixin/mixin.libsonnet') + {
//     _config+:: { alertLabels: { team: 'storage' }, grafanaURL: 'https://grafana.example.com' },
//   };
//   diskcanary.prometheusRules.groups + diskcanary.prometheusAlerts.groups  // one rule file
//   diskcanary.grafanaDashboards                                          // file name -> dashboard
//
// The rules and dashboards are not written here: tools/rulegen (Go) writes
// them into generated/ — the same rules as alerts/diskcanary-rules.yml, the
// same dashboards as dashboards/ — and this file only sorts them into the
// mixin's fields and applies _config. The rules are a template whose
// [[placeholders]] _config fills in: grafanaURL, jobSelector and the main
// thresholds, defaulting to the generator's values (a test checks). The rest
// (for: durations, sample floors, the etcd selector, the target and cluster
// labels, cohorts, the dashboards' threshold lines) is a flag of the
// generator, where the promtool unit tests pin it:
//
//   go run -C tools/rulegen ./cmd/rulegen -help
//   go run -C tools/rulegen ./cmd/rulegen -fdatasync.slow 25ms   # rewrites generated/ too
local generatedDashboards = import 'generated/dashboards.libsonnet';
local generatedRules = import 'generated/diskcanary-rules.json';

local isRecordingGroup(g) = std.all([std.objectHas(r, 'record') for r in g.rules]);

{
  _config+:: {
    // Where Grafana serves the dashboards: every alert's dashboard_url.
    grafanaURL: 'http://localhost:3000',
    // Selects the diskcanary scrape job in up{} (DiskcanaryExporterDown).
    jobSelector: 'job="diskcanary"',
    // DiskcanaryFdatasyncSlow and DiskcanaryReadSlow: 15-minute p99, seconds.
    fdatasyncSlowSeconds: 0.01,
    readSlowSeconds: 0.025,
    // DiskcanarySmartTemperatureHigh, where the drive states no limit.
    smartTemperatureCelsius: 65,
    // DiskcanarySmartWearHigh: share of the rated endurance used.
    wearWarningRatio: 0.8,
    wearCriticalRatio: 0.9,
    // The etcd verdict (DiskcanaryEtcdDegraded): etcd is in trouble at this
    // many slow applies a second over the verdict's window, or this many
    // leader changes within 15 minutes.
    etcdSlowApplyRate: 0.1,
    etcdLeaderChanges: 4,
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

  // The template's placeholders and their text, formatted as the generator
  // formats them (tools/rulegen/knobs.go): a latency as 10 ms or 1.5 s,
  // a ratio also as a percentage.
  // num is a number as Go's %g writes it: the fewest digits that read back
  // as the same number (std.toString writes 17); an integer in full.
  local num(x) =
    if x == std.floor(x) && std.abs(x) < 1e6 then std.toString(x)
    else [t for t in [std.format('%.' + p + 'g', [x]) for p in std.range(1, 17)] if std.parseJson(t) == x][0],
  local latency(s) = if s < 1 then num(s * 1000) + ' ms' else num(s) + ' s',
  local placeholders = [
    ['[[grafanaURL]]', if std.endsWith(c.grafanaURL, '/') then std.substr(c.grafanaURL, 0, std.length(c.grafanaURL) - 1) else c.grafanaURL],
    ['[[jobSelector]]', c.jobSelector],
    ['[[fdatasyncSlowSeconds]]', num(c.fdatasyncSlowSeconds)],
    ['[[fdatasyncSlowSeconds.human]]', latency(c.fdatasyncSlowSeconds)],
    ['[[readSlowSeconds]]', num(c.readSlowSeconds)],
    ['[[readSlowSeconds.human]]', latency(c.readSlowSeconds)],
    ['[[smartTemperatureCelsius]]', num(c.smartTemperatureCelsius)],
    ['[[wearWarningRatio]]', num(c.wearWarningRatio)],
    ['[[wearWarningRatio.percent]]', num(c.wearWarningRatio * 100)],
    ['[[wearCriticalRatio]]', num(c.wearCriticalRatio)],
    ['[[wearCriticalRatio.percent]]', num(c.wearCriticalRatio * 100)],
    ['[[etcdSlowApplyRate]]', num(c.etcdSlowApplyRate)],
    ['[[etcdLeaderChanges]]', num(c.etcdLeaderChanges)],
  ],
  local fill(s) = std.foldl(function(acc, p) std.strReplace(acc, p[0], p[1]), placeholders, s),
  local fillRule(r) = r {
    expr: fill(r.expr),
    [if std.objectHas(r, 'labels') then 'labels']: std.mapWithKey(function(_, v) fill(v), r.labels),
    [if std.objectHas(r, 'annotations') then 'annotations']: std.mapWithKey(function(_, v) fill(v), r.annotations),
  },
  local rules = [g { rules: [fillRule(r) for r in g.rules] } for g in generatedRules.groups],

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
    groups+: [g for g in rules if isRecordingGroup(g)],
  },

  prometheusAlerts+:: {
    groups+: [
      g { rules: [if std.objectHas(r, 'alert') then alert(r) else r for r in g.rules] }
      for g in rules
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
