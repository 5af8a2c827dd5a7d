// SPDX-License-Identifier: MIT
// validate.js DIR... - every YAML document under DIR validated against the
// Kubernetes API schemas: the kubernetes-models validators (generated from
// Kubernetes' OpenAPI spec; pinned in package-lock.json) for the built-in
// kinds, and for the two custom resources the examples use the fields of
// their CRDs (k8s.cni.cncf.io/v1 NetworkAttachmentDefinition, Multus;
// sriovnetwork.openshift.io/v1 SriovIBNetwork, sriov-network-operator),
// with unknown fields refused. A kind with no schema is a failure. Before the
// files, two broken documents must be refused (the validator can fail).
// TAP output.
"use strict";
const fs = require("fs");
const path = require("path");
const yaml = require("js-yaml");
const Ajv = require("ajv");

const ajv = new Ajv({ allErrors: true, strict: false });
const meta = {
  type: "object", required: ["name"],
  properties: { name: { type: "string", minLength: 1 }, namespace: { type: "string" },
    labels: { type: "object", additionalProperties: { type: "string" } },
    annotations: { type: "object", additionalProperties: { type: "string" } } },
  additionalProperties: false,
};
const crd = {
  "k8s.cni.cncf.io/v1/NetworkAttachmentDefinition": {
    type: "object", required: ["apiVersion", "kind", "metadata", "spec"], additionalProperties: false,
    properties: { apiVersion: {}, kind: {}, metadata: meta,
      spec: { type: "object", additionalProperties: false, properties: { config: { type: "string" } } } },
  },
  "sriovnetwork.openshift.io/v1/SriovIBNetwork": {
    type: "object", required: ["apiVersion", "kind", "metadata", "spec"], additionalProperties: false,
    properties: { apiVersion: {}, kind: {}, metadata: meta,
      spec: { type: "object", required: ["resourceName"], additionalProperties: false,
        properties: { resourceName: { type: "string" }, networkNamespace: { type: "string" },
          ipam: { type: "string" }, linkState: { enum: ["auto", "enable", "disable"] },
          capabilities: { type: "string" }, metaPlugins: { type: "string" } } } },
  },
};

function validate(doc) {	// an error message, or null
  const av = String(doc.apiVersion || ""), kind = String(doc.kind || "");
  const key = `${av}/${kind}`;
  if (crd[key]) {
    const v = ajv.compile(crd[key]);
    return v(doc) ? null : ajv.errorsText(v.errors);
  }
  if (!/^[A-Za-z0-9]+$/.test(kind)) return `bad kind '${kind}'`;
  let mod;
  try {
    mod = require(`kubernetes-models/${av}/${kind}`);
  } catch (e) {
    return `no schema for ${key}`;
  }
  try {
    new mod[kind](doc).validate();
    return null;
  } catch (e) {
    return e.message;
  }
}

let n = 0, bad = 0;
function ok(cond, what, detail) {
  n++;
  console.log(`${cond ? "ok" : "not ok"} ${n} - ${what}`);
  if (!cond) {
    bad++;
    if (detail) for (const l of String(detail).split("\n").slice(0, 10)) console.log(`# ${l}`);
  }
}

// the validator refuses what the API server would
const broken = [
  ["a DaemonSet with containerPort 'http'", { apiVersion: "apps/v1", kind: "DaemonSet", metadata: { name: "x" },
    spec: { selector: {}, template: { spec: { containers: [{ name: "c", ports: [{ containerPort: "http" }] }] } } } }],
  ["a Pod without containers", { apiVersion: "v1", kind: "Pod", metadata: { name: "x" }, spec: {} }],
  ["a NAD with an unknown spec field", { apiVersion: "k8s.cni.cncf.io/v1", kind: "NetworkAttachmentDefinition",
    metadata: { name: "x" }, spec: { confg: "{}" } }],
];
for (const [what, doc] of broken) ok(validate(doc) !== null, `self-test: ${what} is refused`);

function walk(d) {
  return fs.readdirSync(d, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(path.join(d, e.name)) : /\.ya?ml$/.test(e.name) ? [path.join(d, e.name)] : []);
}
let count = 0;
for (const dir of process.argv.slice(2)) {
  for (const f of walk(dir).sort()) {
    let docs;
    try {
      docs = yaml.loadAll(fs.readFileSync(f, "utf8")).filter((d) => d != null);
    } catch (e) {
      ok(false, `${f}: YAML`, e.message);
      continue;
    }
    for (const doc of docs) {
      const err = validate(doc);
      ok(err === null, `${f}: ${doc.kind}/${doc.metadata && doc.metadata.name} validates`, err);
      count++;
    }
  }
}
ok(count > 0, `${count} documents validated`);
console.log(`1..${n}`);
process.exit(bad ? 1 : 0);
