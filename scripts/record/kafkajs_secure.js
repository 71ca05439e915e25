#!/usr/bin/env node
// kafkajs TLS and SASL flows for scripts/record_secure_fixtures.py.
//
//   node scripts/record/kafkajs_secure.js < job.json
//
// job.json (see secure_scenarios.py for the common fields):
//   {"client": "kafkajs", "flow": "full" | "bad-login", "bootstrap": "127.0.0.1:9093", "client_id": "...",
//    "topic": "...", "records": [...], "group": "...", "hold_seconds": 0,
//    "tls": null | {"ca": "ca.pem", "keylog": "client.keylog", "version": "1.2" | "1.3" | null,
//                   "ciphers": "OpenSSL cipher string; TLS 1.3 suite names work here too" | null,
//                   "resume": false, "options": 0},
//    "sasl": null | {"mechanism": "plain" | "scram-sha-256" | "scram-sha-512" | "oauthbearer",
//                    "user": "...", "password": "...", "token": "..."},
//    "reauthentication_threshold_ms": 10000}
//
// TLS goes through kafkajs' socketFactory option: every socket is a tls.connect() whose 'keylog'
// events append the NSS key log lines to tls.keylog.  With tls.resume, the session (ticket) of
// the first connection is offered on every later one (Node's `session` option), so the second
// connection resumes the first one's session.  Node passes `ciphers` to OpenSSL for both TLS 1.2
// and TLS 1.3 suite names, and minVersion/maxVersion pin the protocol version.
//
// Flow: admin creates the topic, a producer sends the records, a consumer in group `group` reads
// them back, keeps running hold_seconds (KIP-368 re-authentication happens on the next request
// once the session is within reauthentication_threshold_ms of its lifetime), and disconnects.
// Prints one JSON object on the last line of stdout.
'use strict'

const fs = require('fs')
const tls = require('tls')
const net = require('net')
const { Kafka, logLevel } = require('kafkajs')

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

function readStdin () {
  return new Promise((resolve, reject) => {
    let data = ''
    process.stdin.setEncoding('utf8')
    process.stdin.on('data', chunk => { data += chunk })
    process.stdin.on('end', () => resolve(data))
    process.stdin.on('error', reject)
  })
}

function makeKafka (job, saslOverride) {
  const conf = {
    clientId: job.client_id,
    brokers: [job.bootstrap],
    logLevel: logLevel.WARN,
    logCreator: () => ({ namespace, level, label, log }) => {
      process.stderr.write(`[kafkajs ${label}] ${namespace}: ${log.message} ${log.error || ''}\n`)
    },
    retry: { retries: 1, initialRetryTime: 200 },
    connectionTimeout: 5000,
    authenticationTimeout: 5000
  }
  if (job.reauthentication_threshold_ms != null) conf.reauthenticationThreshold = job.reauthentication_threshold_ms
  const t = job.tls
  if (t) {
    const opts = { ca: [fs.readFileSync(t.ca, 'utf8')] }
    if (t.version) opts.minVersion = opts.maxVersion = `TLSv${t.version}`
    if (t.ciphers) opts.ciphers = t.ciphers
    if (t.options) opts.secureOptions = t.options
    conf.ssl = opts
    let session = null
    conf.socketFactory = ({ host, port, ssl, onConnect }) => {
      const o = Object.assign({ host, port }, !net.isIP(host) ? { servername: host } : {}, ssl)
      if (t.resume && session) o.session = session
      const socket = tls.connect(o, onConnect)
      if (t.keylog) socket.on('keylog', line => fs.appendFileSync(t.keylog, line))
      socket.on('session', s => { if (!session) session = s })
      socket.setKeepAlive(true, 60000)
      return socket
    }
  }
  const s = saslOverride || job.sasl
  if (s) {
    if (s.mechanism === 'oauthbearer') {
      conf.sasl = { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: s.token }) }
    } else {
      conf.sasl = { mechanism: s.mechanism, username: s.user, password: s.password }
    }
  }
  return new Kafka(conf)
}

function toMessage (r) {
  const headers = {}
  for (const [k, v] of r.headers) {
    if (Object.prototype.hasOwnProperty.call(headers, k)) {
      if (!Array.isArray(headers[k])) headers[k] = [headers[k]]
      headers[k].push(v)
    } else {
      headers[k] = v
    }
  }
  return { key: r.key, value: r.value, partition: 0, headers, timestamp: String(r.timestamp) }
}

async function full (job) {
  const kafka = makeKafka(job)
  const out = { calls: [] }
  const admin = kafka.admin()
  await admin.connect()
  const created = await admin.createTopics({ waitForLeaders: true, topics: [{ topic: job.topic, numPartitions: 1, replicationFactor: 1 }] })
  out.calls.push({ call: 'CreateTopics', ok: true, result: created })
  await admin.disconnect()

  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const res = await producer.send({ topic: job.topic, acks: -1, messages: job.records.map(toMessage) })
  let offset = Number(res[0].baseOffset)
  out.sent = job.records.map(r => Object.assign({}, r, { topic: job.topic, partition: 0, offset: offset++ }))
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: job.group, heartbeatInterval: 1000, sessionTimeout: 10000, maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topic: job.topic, fromBeginning: true })
  const got = []
  let resolveDone
  const done = new Promise(resolve => { resolveDone = resolve })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      const headers = []
      for (const [k, v] of Object.entries(message.headers || {})) {
        for (const x of (Array.isArray(v) ? v : [v])) headers.push([k, x == null ? null : x.toString('utf8')])
      }
      got.push({
        topic,
        partition,
        offset: Number(message.offset),
        key: message.key == null ? null : message.key.toString('utf8'),
        value: message.value == null ? null : message.value.toString('utf8'),
        headers,
        timestamp: Number(message.timestamp)
      })
      if (got.length >= job.records.length) resolveDone()
    }
  })
  await Promise.race([done, sleep(30000)])
  await sleep((job.hold_seconds || 0) * 1000)
  await consumer.disconnect()
  out.consumed = got
  return out
}

async function badLogin (job) {
  const admin = makeKafka(job).admin()
  try {
    await admin.connect()
    await admin.disconnect()
    return { login: 'succeeded' }
  } catch (err) {
    return { login: 'failed', login_error: `${err.name}: ${err.message}` }
  }
}

const FLOWS = { full, 'bad-login': badLogin }

async function main () {
  const job = JSON.parse(await readStdin())
  const fn = FLOWS[job.flow]
  if (!fn) {
    process.stdout.write(JSON.stringify({ error: `no flow ${job.flow} for kafkajs` }) + '\n')
    process.exit(2)
  }
  try {
    const result = await fn(job)
    process.stdout.write(JSON.stringify(result) + '\n')
    process.exit(0)
  } catch (err) {
    process.stderr.write(String(err && err.stack) + '\n')
    process.stdout.write(JSON.stringify({ error: `${err.name}: ${err.message}` }) + '\n')
    process.exit(1)
  }
}

main()
