// KafkaJS against a broker: produce, consume in a group with manual commits (a second member resumes from
// them), and a transaction (sendOffsets, commit, abort) read back read_committed. Prints one JSON line.
// Usage: node kafkajs_roundtrip.js BOOTSTRAP
'use strict'
const { Kafka, logLevel } = require('kafkajs')

const bootstrap = process.argv[2]
const kafka = new Kafka({ clientId: 'kafkajs-roundtrip', brokers: [bootstrap], logLevel: logLevel.ERROR,
  retry: { retries: 5 } })
const TOPIC = 'js-in'
const OUT = 'js-out'

// Consume with a group until `until(values)` holds, committing each message's next offset by hand.
async function consumeInGroup (groupId, topic, until, { readUncommitted = false } = {}) {
  const consumer = kafka.consumer({ groupId, readUncommitted, maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const values = []
  await new Promise((resolve, reject) => {
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        values.push(message.value.toString())
        await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }])
        if (until(values)) resolve()
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  return values
}

async function committedTotal (admin, groupId, topic) {
  const [{ partitions }] = await admin.fetchOffsets({ groupId, topics: [topic] })
  return partitions.reduce((sum, p) => sum + Math.max(0, Number(p.offset)), 0)
}

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: 3 }, { topic: OUT, numPartitions: 1 }],
    waitForLeaders: true })
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic: TOPIC, messages: Array.from({ length: 30 }, (_, i) => ({ key: `k${i}`, value: `v${i}` })) })

  const first = await consumeInGroup('js-group', TOPIC, v => v.length === 30)
  const committedFirst = await committedTotal(admin, 'js-group', TOPIC)
  await producer.send({ topic: TOPIC, messages: Array.from({ length: 10 }, (_, i) => ({ key: `m${i}`, value: `w${i}` })) })
  const second = await consumeInGroup('js-group', TOPIC, v => v.length === 10)
  const committedSecond = await committedTotal(admin, 'js-group', TOPIC)
  await producer.disconnect()

  const txProducer = kafka.producer({ transactionalId: 'js-tx', idempotent: true, maxInFlightRequests: 1 })
  await txProducer.connect()
  let txn = await txProducer.transaction()
  await txn.send({ topic: OUT, messages: Array.from({ length: 5 }, (_, i) => ({ value: `c${i}` })) })
  await txn.sendOffsets({ consumerGroupId: 'js-txn-group', topics: [{ topic: TOPIC, partitions: [{ partition: 0, offset: '7' }] }] })
  await txn.commit()
  txn = await txProducer.transaction()
  await txn.send({ topic: OUT, messages: Array.from({ length: 3 }, (_, i) => ({ value: `a${i}` })) })
  await txn.abort()
  txn = await txProducer.transaction()
  await txn.send({ topic: OUT, messages: [{ value: 'end' }] })
  await txn.commit()
  await txProducer.disconnect()

  const committedRead = await consumeInGroup('js-reader', OUT, v => v.includes('end'))
  const [{ partitions: txnOffsets }] = await admin.fetchOffsets({ groupId: 'js-txn-group', topics: [TOPIC] })
  await admin.disconnect()
  console.log(JSON.stringify({
    first: first.length, firstDistinct: new Set(first).size, committedFirst,
    second: second.sort(), committedSecond,
    readCommitted: committedRead,
    txnOffset: txnOffsets.find(p => p.partition === 0).offset
  }))
}

const deadline = setTimeout(() => { console.error('kafkajs_roundtrip: timed out after 90 s'); process.exit(2) }, 90000)
main().then(() => { clearTimeout(deadline) }, err => { console.error(`kafkajs_roundtrip: ${err.stack || err}`); process.exit(1) })
