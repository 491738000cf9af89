// Checks on a `helm template` render of helm/mailfleet that schema validators and linters cannot
// make: the contract between the chart and the processes (ARCHITECTURE.md, the services' config).
//
//   node check-render.mjs split RENDER OUT       RENDER without custom resources, for kubectl-validate
//   node check-render.mjs crds RENDER            ServiceMonitors against the Prometheus Operator schema
//   node check-render.mjs assert RENDER...       the contract (probes, security, checksums, call graph)
//
// Needs the npm packages that check-helm.sh installs under MAILFLEET_NPM_TOOLS (yaml, and
// @kubernetes-models/prometheus-operator for `crds`). Prints one line per failure; exits 1 on any.
import { createRequire } from 'node:module';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const toolsDir = process.env.MAILFLEET_NPM_TOOLS;
if (!toolsDir) {
  process.stderr.write('check-render.mjs: set MAILFLEET_NPM_TOOLS (check-helm.sh does)\n');
  process.exit(2);
}
const requireTool = createRequire(path.join(toolsDir, 'package.json'));
const YAML = requireTool('yaml');

const SERVICES = ['auth', 'domains', 'contacts', 'emails', 'campaigns', 'suppressions', 'webhooks', 'analytics'];
// Who calls whom (ARCHITECTURE.md; the brief of issue 11).
const CALLS = {
  gateway: SERVICES,
  emails: ['auth', 'domains', 'suppressions', 'contacts'],
  campaigns: ['contacts', 'emails', 'domains', 'suppressions'], // suppressions: a campaign's total leaves suppressed contacts out
  contacts: ['campaigns'],
};
const SECRET_ENV = {
  gateway: ['TRACKING_SIGNING_KEY'],
  auth: ['API_KEY_HASH_SECRET'],
  domains: ['DKIM_MASTER_KEY'],
  emails: ['TRACKING_SIGNING_KEY'],
};

const failures = [];
let checks = 0;
function expect(condition, message) {
  checks += 1;
  if (!condition) failures.push(message);
}

function load(file) {
  return YAML.parseAllDocuments(readFileSync(file, 'utf8'))
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0].message}`);
      return doc.toJS();
    })
    .filter((obj) => obj && typeof obj === 'object');
}

const component = (obj) => obj.metadata?.labels?.['app.kubernetes.io/component'];
const byKind = (objs, kind) => objs.filter((o) => o.kind === kind);
const isCustom = (obj) => obj.apiVersion?.startsWith('monitoring.coreos.com/');

function split(render, out) {
  const docs = load(render).filter((o) => !isCustom(o));
  writeFileSync(out, docs.map((d) => `---\n${YAML.stringify(d)}`).join(''));
}

async function crds(render) {
  const monitors = load(render).filter((o) => o.kind === 'ServiceMonitor');
  if (monitors.length === 0) return;
  // An ESM-only package: import its file directly (require.resolve would stop at its exports map).
  const entry = path.join(toolsDir, 'node_modules', '@kubernetes-models', 'prometheus-operator', 'monitoring.coreos.com', 'v1', 'ServiceMonitor.js');
  const { ServiceMonitor } = await import(pathToFileURL(entry).href);
  for (const sm of monitors) {
    try {
      new ServiceMonitor(sm).validate();
      expect(true, '');
    } catch (err) {
      expect(false, `${render}: ServiceMonitor ${sm.metadata.name}: ${err.message}`);
    }
  }
}

function containerOf(deploy) {
  return deploy.spec.template.spec.containers[0];
}

function assertRender(render) {
  const objs = load(render);
  const at = (what) => `${path.basename(render)}: ${what}`;
  const configMaps = new Map(byKind(objs, 'ConfigMap').map((c) => [c.metadata.name, c.data ?? {}]));
  const services = byKind(objs, 'Service');
  const deployments = byKind(objs, 'Deployment');
  const hpaTargets = new Set(byKind(objs, 'HorizontalPodAutoscaler').map((h) => h.spec.scaleTargetRef.name));

  // Every object carries the recommended labels.
  for (const obj of objs) {
    const labels = obj.metadata?.labels ?? {};
    for (const key of ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/version', 'app.kubernetes.io/managed-by', 'app.kubernetes.io/component', 'app.kubernetes.io/part-of']) {
      expect(labels[key], at(`${obj.kind} ${obj.metadata?.name} lacks label ${key}`));
    }
  }

  expect(deployments.some((d) => component(d) === 'gateway'), at('no gateway Deployment'));
  for (const deploy of deployments) {
    const name = component(deploy);
    const where = at(`Deployment ${deploy.metadata.name}`);
    const pod = deploy.spec.template.spec;
    const c = containerOf(deploy);
    const env = configMaps.get(c.envFrom?.[0]?.configMapRef?.name) ?? {};
    const ports = Object.fromEntries((c.ports ?? []).map((p) => [p.name, p.containerPort]));

    // Security: non-root, read-only root filesystem, nothing extra.
    const sc = c.securityContext ?? {};
    expect((sc.runAsNonRoot ?? pod.securityContext?.runAsNonRoot) === true, `${where}: runAsNonRoot`);
    expect(sc.readOnlyRootFilesystem === true, `${where}: readOnlyRootFilesystem`);
    expect(sc.allowPrivilegeEscalation === false, `${where}: allowPrivilegeEscalation false`);
    expect(sc.capabilities?.drop?.includes('ALL'), `${where}: capabilities drop ALL`);
    expect(c.resources?.requests?.cpu && c.resources?.requests?.memory && c.resources?.limits?.memory, `${where}: resources`);

    // A config change rolls the pods.
    expect(/^[0-9a-f]{64}$/.test(deploy.spec.template.metadata.annotations?.['checksum/config'] ?? ''), `${where}: checksum/config annotation`);

    // Graceful shutdown fits in the grace period.
    const budget = Number(env.SHUTDOWN_DELAY_MS) + Number(env.SHUTDOWN_TIMEOUT_MS);
    expect(Number.isFinite(budget) && pod.terminationGracePeriodSeconds * 1000 > budget, `${where}: terminationGracePeriodSeconds must exceed SHUTDOWN_DELAY_MS + SHUTDOWN_TIMEOUT_MS`);
    expect(Number(env.SHUTDOWN_DELAY_MS) >= 1000, `${where}: SHUTDOWN_DELAY_MS set for endpoint propagation`);

    // HPA owns replicas when there is one.
    if (hpaTargets.has(deploy.metadata.name)) expect(deploy.spec.replicas === undefined, `${where}: replicas set although an HPA targets it`);

    if (name === 'gateway') {
      expect(c.readinessProbe?.httpGet?.path === '/v1/health' && c.readinessProbe.httpGet.port === 'http', `${where}: readiness GET /v1/health on http`);
      expect(c.livenessProbe?.httpGet?.path === '/v1/health', `${where}: liveness GET /v1/health`);
      expect(env.HOST === '0.0.0.0', `${where}: HOST must be 0.0.0.0 in a pod`);
      expect(String(ports.http) === env.PORT, `${where}: PORT matches the http container port`);
    } else {
      expect(SERVICES.includes(name), `${where}: unknown component ${name}`);
      expect(c.readinessProbe?.grpc?.port === ports.grpc, `${where}: native gRPC readiness probe on the gRPC port`);
      expect(String(ports.grpc) === env.GRPC_PORT && env.GRPC_HOST === '0.0.0.0', `${where}: GRPC_PORT/GRPC_HOST match the container`);
      expect(c.livenessProbe?.httpGet?.path === '/livez' && c.livenessProbe.httpGet.port === 'metrics', `${where}: liveness GET /livez on the metrics port`);
      expect(env.MONGO_DB, `${where}: MONGO_DB`);
    }
    expect(String(ports.metrics) === env.METRICS_PORT, `${where}: METRICS_PORT matches the metrics container port`);

    // Secrets by reference, each process only its own.
    const secretEnv = (c.env ?? []).filter((e) => e.valueFrom?.secretKeyRef).map((e) => e.name);
    const mongo = name === 'gateway' ? [] : ['MONGO_URL'];
    for (const v of [...mongo, 'NATS_URL', ...(SECRET_ENV[name] ?? [])]) expect(secretEnv.includes(v), `${where}: ${v} from a Secret`);
    // The gateway keeps no state: no database credentials.
    if (name === 'gateway') expect(!secretEnv.includes('MONGO_URL') && !env.MONGO_DB, `${where}: the gateway must not get MongoDB`);
    for (const v of ['DKIM_MASTER_KEY', 'API_KEY_HASH_SECRET', 'TRACKING_SIGNING_KEY']) {
      if (!(SECRET_ENV[name] ?? []).includes(v)) expect(!secretEnv.includes(v), `${where}: must not receive ${v}`);
    }

    // Upstream addresses point at the upstream's Service and gRPC port.
    for (const upstream of CALLS[name] ?? []) {
      const addr = env[`${upstream.toUpperCase()}_GRPC_ADDR`];
      const [host, port] = (addr ?? ':').split(':');
      const svc = services.find((s) => s.metadata.name === host);
      expect(svc && svc.spec.ports.some((p) => p.name === 'grpc' && String(p.port) === port), `${where}: ${upstream.toUpperCase()}_GRPC_ADDR=${addr} is not a gRPC Service port`);
    }
  }

  // Keys the chart writes have the form the processes accept (domains: hex of >= 32 bytes).
  for (const secret of byKind(objs, 'Secret').filter((x) => component(x) === 'keys')) {
    const value = (k) => Buffer.from(secret.data?.[k] ?? '', 'base64').toString('utf8');
    expect(/^([0-9a-fA-F]{2}){32,}$/.test(value('dkim-master-key')), at(`Secret ${secret.metadata.name}: dkim-master-key must be hex of at least 32 bytes`));
    for (const k of ['api-key-hash-secret', 'tracking-signing-key']) expect(value(k).length >= 32, at(`Secret ${secret.metadata.name}: ${k} shorter than 32 characters`));
  }

  // The bootstrap Job's CLI points at auth's gRPC Service.
  for (const job of byKind(objs, 'Job').filter((j) => component(j) === 'bootstrap')) {
    const c = job.spec.template.spec.containers[0];
    const addr = (c.env ?? []).find((e) => e.name === 'AUTH_GRPC_ADDR')?.value ?? ':';
    const [host, port] = addr.split(':');
    expect(services.some((s) => s.metadata.name === host && s.spec.ports.some((p) => p.name === 'grpc' && String(p.port) === port)), at(`Job ${job.metadata.name}: AUTH_GRPC_ADDR=${addr} is not auth's gRPC Service`));
    expect(c.args?.join(' ').includes('services/auth/bin/mailfleet.mjs team create'), at(`Job ${job.metadata.name}: runs the mailfleet CLI`));
  }

  // Services select pods and name ports that exist.
  for (const svc of services) {
    const pods = [...deployments, ...byKind(objs, 'StatefulSet')].filter((w) =>
      Object.entries(svc.spec.selector ?? {}).every(([k, v]) => w.spec.template.metadata.labels?.[k] === v));
    expect(pods.length > 0, at(`Service ${svc.metadata.name} selects no pods`));
    for (const p of svc.spec.ports) {
      if (typeof p.targetPort !== 'string') continue;
      expect(pods.some((w) => w.spec.template.spec.containers.some((c) => (c.ports ?? []).some((cp) => cp.name === p.targetPort))), at(`Service ${svc.metadata.name} targets missing port ${p.targetPort}`));
    }
  }

  // NetworkPolicy: each service admits gRPC from exactly its real callers.
  const policies = byKind(objs, 'NetworkPolicy');
  if (policies.length > 0) {
    const workloads = [...deployments, ...byKind(objs, 'StatefulSet'), ...byKind(objs, 'Job')];
    for (const w of workloads) {
      expect(policies.some((np) => component(np) === component(w)), at(`${w.kind} ${w.metadata.name} has no NetworkPolicy`));
    }
    for (const svc of SERVICES) {
      const np = policies.find((p) => component(p) === svc);
      if (!np) continue;
      const expected = Object.entries(CALLS).filter(([, callees]) => callees.includes(svc)).map(([caller]) => caller);
      // The bootstrap Job's CLI creates the first team through auth.
      if (svc === 'auth' && byKind(objs, 'Job').some((j) => component(j) === 'bootstrap')) expected.push('bootstrap');
      expected.sort();
      const rule = (np.spec.ingress ?? []).find((r) => r.ports?.some((p) => p.port === 'grpc') && r.from?.some((f) => f.podSelector?.matchExpressions));
      const got = (rule?.from ?? []).flatMap((f) => f.podSelector?.matchExpressions?.find((m) => m.key === 'app.kubernetes.io/component')?.values ?? []).sort();
      expect(JSON.stringify(got) === JSON.stringify(expected), at(`NetworkPolicy ${np.metadata.name}: gRPC callers ${JSON.stringify(got)}, expected ${JSON.stringify(expected)}`));
    }
  }

  // ServiceMonitors select a Service with a metrics port.
  for (const sm of byKind(objs, 'ServiceMonitor')) {
    const sel = sm.spec.selector.matchLabels ?? {};
    const svc = services.filter((s) => Object.entries(sel).every(([k, v]) => s.metadata.labels?.[k] === v));
    expect(svc.length === 1 && svc[0].spec.ports.some((p) => p.name === 'metrics'), at(`ServiceMonitor ${sm.metadata.name} selects ${svc.length} Services (want the one with a metrics port)`));
  }
}

const [cmd, ...args] = process.argv.slice(2);
try {
  if (cmd === 'split') split(args[0], args[1]);
  else if (cmd === 'crds') await crds(args[0]);
  else if (cmd === 'assert') for (const f of args) assertRender(f);
  else throw new Error('usage: check-render.mjs split|crds|assert ...');
} catch (err) {
  failures.push(err.message);
}
for (const f of failures) process.stdout.write(`FAIL ${f}\n`);
if (cmd !== 'split') process.stdout.write(`check-render: ${checks - failures.length} passed, ${failures.length} failed\n`);
process.exit(failures.length > 0 ? 1 : 0);
