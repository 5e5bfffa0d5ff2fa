// KafkaJS logging in with SASL (PLAIN, or OAUTHBEARER with Kafka's unsecured token) and producing for a while:
// with a short connections.max.reauth.ms on the broker it re-authenticates (KIP-368) on its connections.
// Prints one JSON line. Usage: node kafkajs_sasl.js BOOTSTRAP plain|oauthbearer MILLISECONDS
'use strict'
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, mechanism, duration] = process.argv.slice(2)

function unsecuredToken (principal) { // Kafka's unsecured JWS: alg none, sub, iat, exp, no signature
  const part = value => Buffer.from(JSON.stringify(value)).toString('base64url')
  const now = Date.now() / 1000
  return `${part({ alg: 'none' })}.${part({ sub: principal, iat: now, exp: now + 3600 })}.`
}

const sasl = mechanism === 'plain'
  ? { mechanism: 'plain', username: 'alice', password: 'alice-secret' }
  : { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: unsecuredToken('alice') }) }

async function main () {
  const kafka = new Kafka({ clientId: 'kafkajs-sasl', brokers: [bootstrap], sasl, logLevel: logLevel.ERROR,
    reauthenticationThreshold: 500 })
  const producer = kafka.producer({ allowAutoTopicCreation: true })
  await producer.connect()
  const end = Date.now() + Number(duration)
  let sent = 0
  while (Date.now() < end) {
    await producer.send({ topic: `js-sasl-${mechanism}`, messages: [{ value: `m${sent}` }] })
    sent += 1
    await new Promise(resolve => setTimeout(resolve, 50))
  }
  await producer.disconnect()
  console.log(JSON.stringify({ sent }))
}

const deadline = setTimeout(() => { console.error('kafkajs_sasl: timed out after 90 s'); process.exit(2) }, 90000)
main().then(() => { clearTimeout(deadline) }, err => { console.error(`kafkajs_sasl: ${err.stack || err}`); process.exit(1) })
