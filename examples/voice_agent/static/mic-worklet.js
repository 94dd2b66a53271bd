// Microphone capture on the audio thread: mono, resampled to 16 kHz, 16-bit PCM in 40 ms frames.
const TARGET_RATE = 16000;
const FRAME_SAMPLES = 640; // 40 ms at 16 kHz

class MicCapture extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = sampleRate / TARGET_RATE; // input samples per output sample
    this.position = 0; // where the next output sample falls in the current block (-1: previous)
    this.previous = 0; // the last input sample of the previous block, for interpolation
    this.frame = new Int16Array(FRAME_SAMPLES);
    this.filled = 0;
  }

  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    if (!channel) return true;
    // Linear interpolation between input samples; index -1 is the previous block's last one.
    while (this.position < channel.length - 1) {
      const index = Math.floor(this.position);
      const fraction = this.position - index;
      const before = index < 0 ? this.previous : channel[index];
      const after = channel[index + 1];
      const value = before + (after - before) * fraction;
      const clipped = Math.max(-1, Math.min(1, value));
      this.frame[this.filled++] = clipped < 0 ? clipped * 0x8000 : clipped * 0x7fff;
      if (this.filled === FRAME_SAMPLES) {
        this.port.postMessage(this.frame.buffer, [this.frame.buffer]);
        this.frame = new Int16Array(FRAME_SAMPLES);
        this.filled = 0;
      }
      this.position += this.step;
    }
    this.position -= channel.length;
    this.previous = channel[channel.length - 1];
    return true;
  }
}

registerProcessor("mic-capture", MicCapture);
