// The compatibility scenarios as a user of kafkajs writes them.
//
// Usage: node scenarios.js COMMAND BOOTSTRAP key=value...; prints one JSON
// object on stdout (the last line). The Python driver
// (compat_tests/drivers/kafkajs.py) asks server.js, which calls run() once per
// question: each question makes its own kafkajs clients and disconnects them.
'use strict'

const crypto = require('crypto')

const {
  Kafka, CompressionTypes, CompressionCodecs, ConfigResourceTypes, AssignerProtocol, logLevel,
} = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const LZ4Codec = require('kafkajs-lz4')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec

const TIMEOUT_MS = 30000
const TRACE = '0af7651916cd43dd8448eb211c80319c' // header value, as in scenario_data.py
const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}
const ACKS = { all: -1, 1: 1, 0: 0 }
// A consumer's disconnect waits for its fetch in flight, which the broker holds up to maxWaitTimeInMs
// (kafkajs' default 5000) when nothing new comes: every consuming question paid those 5 s at its end.
const CONSUMER = { sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 500 }

function record (prefix, i, partition) {
  return {
    key: `${prefix}k${i}`,
    value: `${prefix}v${i}`,
    headers: { src: 'compat', trace: TRACE },
    partition,
  }
}

function received (partition, m) {
  return {
    p: partition,
    o: Number(m.offset),
    k: m.key === null ? null : m.key.toString(),
    v: m.value === null ? null : m.value.toString(),
    ts: Number(m.timestamp),
    h: Object.entries(m.headers || {}).map(([k, v]) => [k, v.toString()]),
  }
}

async function until (done, what, timeoutMs = TIMEOUT_MS) {
  const deadline = Date.now() + timeoutMs
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

// One question's clients and options: nothing outlives the question.
function question (bootstrap, opts) {
  const num = (name, fallback) => (opts[name] === undefined ? fallback : Number(opts[name]))
  const kafka = new Kafka({
    clientId: 'kafkacompat-compat',
    brokers: [bootstrap],
    logLevel: logLevel.ERROR,
    retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 2000 },
  })

  let trickleProducer

  async function withAdmin (use) {
    const admin = kafka.admin()
    await admin.connect()
    try {
      return await use(admin)
    } finally {
      await admin.disconnect()
    }
  }

  async function send (topic, n, prefix, partition, { acks = 'all', compression = 'none', idempotent = false } = {}) {
    const producer = kafka.producer({ idempotent, maxInFlightRequests: idempotent ? 1 : undefined })
    await producer.connect()
    try {
      const messages = Array.from({ length: n }, (_, i) => record(prefix, i, partition))
      const result = await producer.send({ topic, acks: ACKS[acks], compression: CODECS[compression], messages })
      if (acks === '0') return messages.map(() => -1)
      const base = Number(result[0].baseOffset)
      return messages.map((_, i) => base + i)
    } finally {
      await producer.disconnect()
    }
  }

  // kafkajs consumes only as a group member: a group of its own stands in for assign(),
  // keeping the records of `partition` alone when one is given (a lone member gets them all).
  async function consumeInGroup (topic, n, { groupId, fromBeginning = true, seekTo, trickle, commit = false, partition }) {
    const consumer = kafka.consumer({ groupId, ...CONSUMER })
    const out = []
    let crash
    // a crash kafkajs restarts from (a retriable error such as COORDINATOR_LOAD_IN_PROGRESS) is not the end
    consumer.on(consumer.events.CRASH, (e) => { if (!e.payload.restart) crash = e.payload.error })
    await consumer.connect()
    try {
      await consumer.subscribe({ topic, fromBeginning })
      await consumer.run({
        autoCommit: false,
        eachMessage: async ({ partition: from, message }) => {
          if (partition === undefined || from === partition) out.push(received(from, message))
        },
      })
      if (seekTo !== undefined) consumer.seek({ topic, partition: partition || 0, offset: String(seekTo) })
      const deadline = Date.now() + TIMEOUT_MS
      let sent = 0
      while (out.length < n) {
        if (crash) throw crash
        if (Date.now() > deadline) throw new Error(`timed out after ${out.length} of ${n} records`)
        if (trickle) {
          // a member cannot tell when "latest" has been resolved: send one at a time
          await trickleSend(topic, sent++, partition || 0)
        }
        await new Promise((resolve) => setTimeout(resolve, trickle ? 200 : 50))
      }
      const got = out.slice(0, n)
      if (commit) {
        const last = got[n - 1]
        await consumer.commitOffsets([{ topic, partition: last.p, offset: String(last.o + 1) }])
      }
      return got
    } finally {
      await consumer.disconnect()
    }
  }

  // trickled records are numbered like every other run: new-k0, new-k1, ...
  async function trickleSend (topic, i, partition) {
    if (!trickleProducer) {
      trickleProducer = kafka.producer()
      await trickleProducer.connect()
    }
    await trickleProducer.send({ topic, messages: [record('new-', i, partition)] })
  }

  const commands = {
    async produce () {
      const offsets = await send(opts.topic, num('n', 1), opts.prefix || '', num('partition', 0), {
        acks: opts.acks, compression: opts.compression, idempotent: opts.idempotent === 'true',
      })
      return { offsets }
    },

    async consume () {
      const topic = opts.topic
      const groupId = `kafkajs-reader-${crypto.randomUUID()}`
      const start = opts.start || 'earliest'
      let seekTo
      if (start !== 'earliest' && start !== 'latest') {
        const found = await withAdmin((admin) => admin.fetchTopicOffsetsByTimestamp(topic, Number(start)))
        seekTo = Number(found.find((p) => p.partition === num('partition', 0)).offset)
      }
      const records = await consumeInGroup(topic, num('n', 1), {
        groupId, fromBeginning: start !== 'latest', seekTo, trickle: num('produce_after', 0) > 0,
        partition: num('partition', 0),
      })
      return { records }
    },

    async group_consume () {
      return { records: await consumeInGroup(opts.topic, num('n', 1), { groupId: opts.group, commit: true }) }
    },

    async group_of_three () {
      const topic = opts.topic
      const members = []
      for (let i = 0; i < 3; i++) {
        const consumer = kafka.consumer({ groupId: opts.group, ...CONSUMER })
        const member = { consumer, parts: [] }
        consumer.on(consumer.events.GROUP_JOIN, (e) => {
          member.parts = (e.payload.memberAssignment[topic] || []).slice().sort()
        })
        await consumer.connect()
        await consumer.subscribe({ topic, fromBeginning: true })
        await consumer.run({ eachMessage: async () => {} })
        members.push(member)
      }
      const spread = (ms) => {
        const all = ms.flatMap((m) => m.parts).sort()
        return ms.every((m) => m.parts.length > 0) && JSON.stringify(all) === '[0,1,2]'
      }
      try {
        await until(() => spread(members), 'three members holding a partition each', 60000)
        const before = members.map((m) => m.parts)
        await members.shift().consumer.disconnect()
        await until(() => spread(members), 'two members holding all partitions', 60000)
        return { before, after: members.map((m) => m.parts) }
      } finally {
        for (const m of members) await m.consumer.disconnect()
      }
    },

    async create_describe_topic () {
      return withAdmin(async (admin) => {
        await admin.createTopics({ topics: [{ topic: opts.topic, numPartitions: num('partitions', 1) }], waitForLeaders: true })
        const meta = await admin.fetchTopicMetadata({ topics: [opts.topic] })
        const listed = (await admin.listTopics()).includes(opts.topic)
        return { partitions: meta.topics[0].partitions.length, listed }
      })
    },

    async alter_configs () {
      return withAdmin(async (admin) => {
        const retention = async () => {
          const found = await admin.describeConfigs({
            resources: [{ type: ConfigResourceTypes.TOPIC, name: opts.topic, configNames: ['retention.ms'] }],
            includeSynonyms: false,
          })
          return found.resources[0].configEntries.find((e) => e.configName === 'retention.ms').configValue
        }
        const before = await retention()
        await admin.alterConfigs({
          resources: [{
            type: ConfigResourceTypes.TOPIC, name: opts.topic, configEntries: [{ name: 'retention.ms', value: opts.value }],
          }],
        })
        return { before, after: await retention() }
      })
    },

    async create_partitions () {
      return withAdmin(async (admin) => {
        await admin.createPartitions({ topicPartitions: [{ topic: opts.topic, count: num('total', 1) }] })
        const meta = await admin.fetchTopicMetadata({ topics: [opts.topic] })
        return { partitions: meta.topics[0].partitions.length }
      })
    },

    async delete_records () {
      return withAdmin(async (admin) => {
        // kafkajs routes deleteTopicRecords by metadata it already holds: load it first
        await admin.fetchTopicOffsets(opts.topic)
        await admin.deleteTopicRecords({ topic: opts.topic, partitions: [{ partition: 0, offset: opts.before }] })
        const offsets = await admin.fetchTopicOffsets(opts.topic)
        return { low: Number(offsets.find((p) => p.partition === 0).low) }
      })
    },

    async delete_topic () {
      return withAdmin(async (admin) => {
        await admin.deleteTopics({ topics: [opts.topic] })
        // every broker learns of a deletion a moment after the answer (Kafka's Admin javadoc): look again
        const deadline = Date.now() + 10000
        let listed = true
        while ((listed = (await admin.listTopics()).includes(opts.topic)) && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
        return { listed }
      })
    },

    async list_describe_groups () {
      const consumer = kafka.consumer({ groupId: opts.group, ...CONSUMER })
      let joined = false
      consumer.on(consumer.events.GROUP_JOIN, () => { joined = true })
      await consumer.connect()
      try {
        await consumer.subscribe({ topic: opts.topic, fromBeginning: true })
        await consumer.run({ eachMessage: async () => {} })
        await until(() => joined, 'an assignment')
        return await withAdmin(async (admin) => {
          const listed = (await admin.listGroups()).groups.map((g) => g.groupId)
          const group = (await admin.describeGroups([opts.group])).groups[0]
          const partitions = group.members.flatMap((m) => {
            const assignment = AssignerProtocol.MemberAssignment.decode(m.memberAssignment)
            return Object.values(assignment.assignment).flat()
          }).sort()
          return { listed: listed.includes(opts.group), state: group.state, members: group.members.length, partitions }
        })
      } finally {
        await consumer.disconnect()
      }
    },
  }

  return {
    commands,
    async close () {
      if (trickleProducer) await trickleProducer.disconnect()
    },
  }
}

async function run ([command, bootstrap, ...rest]) {
  const opts = Object.fromEntries(rest.map((arg) => {
    const at = arg.indexOf('=')
    return [arg.slice(0, at), arg.slice(at + 1)]
  }))
  const { commands, close } = question(bootstrap, opts)
  const ask = commands[command]
  if (!ask) throw new Error(`unknown command ${command}`)
  try {
    return JSON.stringify(await ask()) + '\n'
  } finally {
    await close()
  }
}

if (require.main === module) require('./server').runOnce(run)

module.exports = { run }
