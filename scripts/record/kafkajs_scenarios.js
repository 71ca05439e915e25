#!/usr/bin/env node
// kafkajs scenarios for scripts/record_fixtures.py.
//
//   node scripts/record/kafkajs_scenarios.js < job.json
//
// job.json: {"client": "kafkajs", "scenario": "admin" | "produce" | "consume" | "bulk-produce" | "bulk-consume",
//            "bootstrap": "127.0.0.1:9092", "plan": {...}}
// Prints one JSON object on the last line of stdout (kafkajs' own log goes to stderr).
'use strict'

const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }

function readStdin () {
  return new Promise((resolve, reject) => {
    let data = ''
    process.stdin.setEncoding('utf8')
    process.stdin.on('data', chunk => { data += chunk })
    process.stdin.on('end', () => resolve(data))
    process.stdin.on('error', reject)
  })
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

function makeKafka (job) {
  return new Kafka({
    clientId: job.plan.client_ids.kafkajs,
    brokers: [job.bootstrap],
    logLevel: logLevel.WARN,
    logCreator: () => ({ namespace, level, label, log }) => {
      process.stderr.write(`[kafkajs ${label}] ${namespace}: ${log.message} ${log.error || ''}\n`)
    },
    retry: { retries: 3 }
  })
}

async function call (calls, name, fn) {
  try {
    const result = await fn()
    calls.push({ call: name, ok: true, result })
    return result
  } catch (e) {
    calls.push({ call: name, ok: false, error: `${e.name}: ${e.message}` })
    return null
  }
}

async function admin (job) {
  const kafka = makeKafka(job)
  const a = kafka.admin()
  const calls = []
  const topics = job.plan.admin_topics
  await a.connect()
  await call(calls, 'CreateTopics', () => a.createTopics({
    waitForLeaders: true,
    topics: topics.map(t => ({ topic: t.name, numPartitions: t.partitions, replicationFactor: 1 }))
  }))
  await call(calls, 'Metadata(listTopics)', async () => (await a.listTopics()).sort())
  await call(calls, 'Metadata(fetchTopicMetadata)', async () =>
    (await a.fetchTopicMetadata({ topics: topics.map(t => t.name) })).topics.map(t => ({ topic: t.name, partitions: t.partitions.length })))
  const cluster = await call(calls, 'DescribeCluster', () => a.describeCluster())
  await call(calls, 'DescribeConfigs(topic)', async () => {
    const r = await a.describeConfigs({ includeSynonyms: false, resources: [{ type: 2, name: topics[0].name }] })
    return r.resources.map(x => ({ name: x.resourceName, errorCode: x.errorCode, n: x.configEntries.length }))
  })
  if (cluster && cluster.brokers.length) {
    await call(calls, 'DescribeConfigs(broker)', async () => {
      const r = await a.describeConfigs({ includeSynonyms: false, resources: [{ type: 4, name: String(cluster.brokers[0].nodeId) }] })
      return r.resources.map(x => ({ name: x.resourceName, errorCode: x.errorCode, n: x.configEntries.length }))
    })
  }
  await call(calls, 'ListGroups', async () => (await a.listGroups()).groups)
  await call(calls, 'DeleteTopics', () => a.deleteTopics({ topics: topics.map(t => t.name) }))
  await a.disconnect()
  return { calls }
}

function toMessage (r) {
  // Duplicate header keys: kafkajs takes an array value and writes one header per element,
  // in order; keys come out in object insertion order, so the wire order is the plan's order
  // as long as duplicate keys are adjacent (they are, by construction of the plan).
  const headers = {}
  for (const [k, v] of r.headers) {
    if (Object.prototype.hasOwnProperty.call(headers, k)) {
      if (!Array.isArray(headers[k])) headers[k] = [headers[k]]
      headers[k].push(v)
    } else {
      headers[k] = v
    }
  }
  return { key: r.key, value: r.value, partition: r.partition, headers, timestamp: String(r.timestamp) }
}

async function produce (job) {
  const kafka = makeKafka(job)
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const sent = []
  for (const batch of job.plan.produce) {
    const entries = batch.records.map(r => Object.assign({}, r, { topic: batch.topic, compression: batch.compression, acks: batch.acks }))
    try {
      const res = await producer.send({
        topic: batch.topic,
        acks: batch.acks,
        compression: CODECS[batch.compression],
        messages: batch.records.map(toMessage)
      })
      // res: [{topicName, partition, errorCode, baseOffset}] — offsets are assigned in send order per partition
      const base = {}
      for (const p of res || []) base[p.partition] = Number(p.baseOffset)
      for (const e of entries) {
        e.delivered = true
        e.offset = batch.acks === 0 ? null : base[e.partition]++
      }
    } catch (err) {
      for (const e of entries) { e.delivered = false; e.error = `${err.name}: ${err.message}` }
    }
    sent.push(...entries)
  }
  await producer.disconnect()
  return { sent }
}

async function consume (job) {
  const kafka = makeKafka(job)
  const plan = job.plan
  const topics = plan.consume_topics.kafkajs
  const expected = plan.consume_expected.kafkajs
  const consumer = kafka.consumer({ groupId: plan.group, heartbeatInterval: 500, sessionTimeout: 10000, maxWaitTimeInMs: 200 })
  await consumer.connect()
  for (const topic of topics) await consumer.subscribe({ topic, fromBeginning: true })
  const got = []
  const last = {}
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
      last[`${topic}\u0000${partition}`] = { topic, partition, offset: String(Number(message.offset) + 1) }
      if (got.length >= expected) resolveDone()
    }
  })
  await Promise.race([done, sleep(40000)])
  let committed = true
  try {
    await consumer.commitOffsets(Object.values(last))
  } catch (err) {
    committed = `${err.name}: ${err.message}`
  }
  await sleep(plan.heartbeat_seconds * 1000)
  await consumer.disconnect()
  return { group: plan.group, topics, consumed: got, committed }
}

// Bulk mode (record_fixtures.py --bulk N --bulk-client kafkajs): N records to plan.bulk.topic,
// record i: key k-i, value "bulk-value-<i, 8 digits>-" + "x" * pad, header n=i, partition
// i % partitions, timestamp base + i; sent in chunks of 1000 (one Produce request each).
async function bulkProduce (job) {
  const plan = job.plan
  const bulk = plan.bulk
  const kafka = makeKafka(job)
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const pad = 'x'.repeat(bulk.pad)
  const t0 = Date.now()
  const chunk = 1000
  for (let start = 0; start < bulk.count; start += chunk) {
    const messages = []
    for (let i = start; i < Math.min(bulk.count, start + chunk); i++) {
      messages.push({
        key: `k-${i}`,
        value: `bulk-value-${String(i).padStart(8, '0')}-${pad}`,
        partition: i % bulk.partitions,
        headers: { n: String(i) },
        timestamp: String(plan.base_timestamp + i)
      })
    }
    await producer.send({ topic: bulk.topic, acks: 1, compression: CODECS[bulk.compression], messages })
  }
  await producer.disconnect()
  return { produced: bulk.count, seconds: (Date.now() - t0) / 1000 }
}

async function bulkConsume (job) {
  const plan = job.plan
  const bulk = plan.bulk
  const kafka = makeKafka(job)
  const consumer = kafka.consumer({
    groupId: `${plan.group}-bulk`, maxWaitTimeInMs: 200, heartbeatInterval: 1000, sessionTimeout: 30000,
    maxBytesPerPartition: 4 * 1024 * 1024, maxBytes: 16 * 1024 * 1024
  })
  await consumer.connect()
  await consumer.subscribe({ topic: bulk.topic, fromBeginning: true })
  let got = 0
  let resolveDone
  const done = new Promise(resolve => { resolveDone = resolve })
  const t0 = Date.now()
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      got += batch.messages.length
      if (got >= bulk.count) resolveDone()
    }
  })
  await Promise.race([done, sleep(300000)])
  const seconds = (Date.now() - t0) / 1000
  await consumer.disconnect()
  return { consumed: got, seconds }
}

const SCENARIOS = { admin, produce, consume, 'bulk-produce': bulkProduce, 'bulk-consume': bulkConsume }

async function main () {
  const job = JSON.parse(await readStdin())
  const fn = SCENARIOS[job.scenario]
  if (!fn) {
    process.stdout.write(JSON.stringify({ error: `no scenario ${job.scenario} for kafkajs` }) + '\n')
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
