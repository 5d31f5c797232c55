"""The real drivers the kernel suite binds to i2c-stub, and the registers it presets for them.

i2c-stub (drivers/i2c/i2c-stub.c) answers SMBus transfers from a plain register file that starts at 0:
one 16-bit word per register, a byte read returning its low byte, an I2C block read the low bytes of
consecutive registers. So every register a driver reads at probe must be preset (its chip ID, and
range/ODR registers it decodes through a table, else e.g. bmi160 answers EINVAL for in_accel_scale),
and the data registers carry the raw values `raw` files and --once then read.

Each axis gets a distinct, non-zero raw value (`raw` below is what the driver's `in_*_raw` must read);
`changed` is a second set a test writes to follow a change. The encodings follow the drivers:
  bmi160      8-bit regmap, le16 (accel 0x12.., gyro 0x0C..)          bmi160_core.c bmi160_get_data
  st_lsm6dsx  le16 (gyro OUTX_L_G 0x22.., accel OUTX_L_A 0x28..)       st_lsm6dsx_read_oneshot
  bmc150      le16, 12 bits for bma255 in the upper bits (0x02..)     bmc150_accel_get_axis
  mxc4005     be16, 12 bits in the upper bits (XOUT_UPPER 0x03..)     mxc4005_read_axis
  kxcjk1013   SMBus word reads, le16, 12 bits upper (XOUT_L 0x06..)   kxcjk1013_get_acc_reg
  mpu6050     be16 (ACCEL_XOUT_H 0x3B.., GYRO_XOUT_H 0x43..)          inv_mpu6050_sensor_show
  fxos8700    be16, accel 14 bits upper (OUT_X_MSB 0x01..), magn 16 bits (M_OUT_X_MSB 0x33..)
"""
import ctypes
import fcntl
import os
import struct

I2C_SLAVE_FORCE = 0x0706
I2C_SMBUS = 0x0720
I2C_SMBUS_WRITE, I2C_SMBUS_READ = 0, 1
I2C_SMBUS_BYTE_DATA, I2C_SMBUS_WORD_DATA = 2, 3


class SMBus:
    """Plain SMBus byte/word writes through /dev/i2c-N (what i2cset -f -y does)."""

    def __init__(self, bus):
        self.fd = os.open(f"/dev/i2c-{bus}", os.O_RDWR)
        self.addr = None

    def _xfer(self, addr, rw, cmd, size, data):
        if addr != self.addr:
            fcntl.ioctl(self.fd, I2C_SLAVE_FORCE, addr)
            self.addr = addr
        args = struct.pack("BBxxIQ", rw, cmd, size, ctypes.addressof(data))
        fcntl.ioctl(self.fd, I2C_SMBUS, args)

    def write_byte(self, addr, reg, value):
        data = (ctypes.c_ubyte * 34)(value & 0xFF)
        self._xfer(addr, I2C_SMBUS_WRITE, reg, I2C_SMBUS_BYTE_DATA, data)

    def write_word(self, addr, reg, value):
        data = (ctypes.c_ubyte * 34)(value & 0xFF, (value >> 8) & 0xFF)
        self._xfer(addr, I2C_SMBUS_WRITE, reg, I2C_SMBUS_WORD_DATA, data)

    def read_byte(self, addr, reg):
        data = (ctypes.c_ubyte * 34)()
        self._xfer(addr, I2C_SMBUS_READ, reg, I2C_SMBUS_BYTE_DATA, data)
        return data[0]

    def close(self):
        os.close(self.fd)


def u16(v):
    return v & 0xFFFF


def le16(reg, v):
    return [(reg, u16(v) & 0xFF), (reg + 1, u16(v) >> 8)]


def be16(reg, v):
    return [(reg, u16(v) >> 8), (reg + 1, u16(v) & 0xFF)]


# One entry per i2c client. `sensors`: IIO device name -> {channel type -> (raw x, y, z)}.
# `encode(type, values)` -> list of (register, value, "b"|"w") writes for the data registers.
class Chip:
    def __init__(self, key, driver_name, addr, module, probe_regs, sensors, changed, encode, word=False):
        self.key, self.driver_name, self.addr, self.module = key, driver_name, addr, module
        self.probe_regs, self.sensors, self.changed, self.encode_fn = probe_regs, sensors, changed, encode
        self.word = word

    def data_writes(self, values=None):
        values = values or self.sensors
        out = []
        for dev, types in values.items():
            for t, xyz in types.items():
                out += self.encode_fn(dev, t, xyz)
        return out


def _bmi160(dev, t, v):
    base = {"accel": 0x12, "anglvel": 0x0C}[t]
    return [w + ("b",) for i in range(3) for w in le16(base + 2 * i, v[i])]


def _lsm6dso(dev, t, v):
    base = {"accel": 0x28, "anglvel": 0x22}[t]
    return [w + ("b",) for i in range(3) for w in le16(base + 2 * i, v[i])]


def _bma255(dev, t, v):
    return [w + ("b",) for i in range(3) for w in le16(0x02 + 2 * i, v[i] << 4)]


def _mxc4005(dev, t, v):
    return [w + ("b",) for i in range(3) for w in be16(0x03 + 2 * i, v[i] << 4)]


def _kxcjk1013(dev, t, v):
    return [(0x06 + 2 * i, u16(v[i] << 4), "w") for i in range(3)]


def _mpu6050(dev, t, v):
    base = {"accel": 0x3B, "anglvel": 0x43}[t]
    return [w + ("b",) for i in range(3) for w in be16(base + 2 * i, v[i])]


def _fxos8700(dev, t, v):
    # accelerometer: 14 bits in the upper bits (the driver shifts right by 2); magnetometer: 16 bits.
    base, shift = {"accel": (0x01, 2), "magn": (0x33, 0)}[t]
    return [w + ("b",) for i in range(3) for w in be16(base + 2 * i, v[i] << shift)]


CHIPS = [
    Chip("bmi160", "bmi160", 0x68, "bmi160_i2c",
         # chip ID; ACC_CONF ODR 100 Hz (0x28), ACC_RANGE ±2 g (0x03), GYR_CONF 100 Hz, GYR_RANGE ±2000 °/s.
         [(0x00, 0xD1), (0x40, 0x28), (0x41, 0x03), (0x42, 0x28), (0x43, 0x00)],
         {"bmi160": {"accel": (1200, -2300, 16100), "anglvel": (110, -220, 330)}},
         {"bmi160": {"accel": (-3100, 4200, -15900), "anglvel": (-440, 550, -660)}},
         _bmi160),
    Chip("lsm6dso", "lsm6dso", 0x6A, "st_lsm6dsx_i2c",
         [(0x0F, 0x6C)],
         {"lsm6dso_accel": {"accel": (1300, -2400, 16200)}, "lsm6dso_gyro": {"anglvel": (130, -260, 390)}},
         {"lsm6dso_accel": {"accel": (-3200, 4300, -15800)}, "lsm6dso_gyro": {"anglvel": (-470, 580, -690)}},
         _lsm6dso),
    Chip("bma255", "bma255", 0x18, "bmc150-accel-i2c",
         [(0x00, 0xFA)],
         {"bma255": {"accel": (150, -250, 500)}},
         {"bma255": {"accel": (-350, 450, -480)}},
         _bma255),
    Chip("mxc4005", "mxc4005", 0x15, "mxc4005",
         [],                                   # the driver checks no ID
         {"mxc4005": {"accel": (160, -260, 1000)}},
         {"mxc4005": {"accel": (-360, 460, -990)}},
         _mxc4005),
    Chip("kxcjk1013", "kxcjk1013", 0x0E, "kxcjk-1013",
         [(0x0F, 0x11)],
         {"kxcjk1013": {"accel": (170, -270, 500)}},
         {"kxcjk1013": {"accel": (-370, 470, -490)}},
         _kxcjk1013, word=True),
    Chip("mpu6050", "mpu6050", 0x69, "inv-mpu6050-i2c",
         [(0x75, 0x68)],
         {"mpu6050": {"accel": (-1500, 2600, 16300), "anglvel": (-120, 240, -360)}},
         {"mpu6050": {"accel": (3300, -4400, -15700), "anglvel": (480, -590, 700)}},
         _mpu6050),
    Chip("fxos8700", "fxos8700", 0x1E, "fxos8700_i2c",
         [(0x0D, 0xC7)],
         {"fxos8700": {"accel": (1400, -2500, 4100), "magn": (310, -420, 530)}},
         {"fxos8700": {"accel": (-3400, 4500, -4000), "magn": (-640, 750, -860)}},
         _fxos8700),
]

HID_SENSORS = {"accel_3d": "accel", "gyro_3d": "anglvel", "magn_3d": "magn"}

# What motion-monitor should list for each IIO device (by its name attribute).
EXPECTED_SENSORS = {
    "bmi160": ["accelerometer", "gyroscope"],
    "lsm6dso_accel": ["accelerometer"],
    "lsm6dso_gyro": ["gyroscope"],
    "bma255": ["accelerometer"],
    "mxc4005": ["accelerometer"],
    "kxcjk1013": ["accelerometer"],
    "mpu6050": ["accelerometer", "gyroscope"],
    "fxos8700": ["accelerometer", "magnetometer"],
    "accel_3d": ["accelerometer"],
    "gyro_3d": ["gyroscope"],
    "magn_3d": ["magnetometer"],
}

# The row of the report's matrix each IIO device belongs to.
DRIVER_OF = {
    "bmi160": "bmi160", "lsm6dso_accel": "st_lsm6dsx", "lsm6dso_gyro": "st_lsm6dsx",
    "bma255": "bmc150_accel", "mxc4005": "mxc4005", "kxcjk1013": "kxcjk1013",
    "mpu6050": "inv_mpu6050", "fxos8700": "fxos8700",
    "accel_3d": "hid-sensor-accel-3d", "gyro_3d": "hid-sensor-gyro-3d", "magn_3d": "hid-sensor-magn-3d",
}

MODULES = [c.module for c in CHIPS] + ["i2c-dev", "uhid", "hid-sensor-hub", "hid-sensor-accel-3d",
                                      "hid-sensor-gyro-3d", "hid-sensor-magn-3d"]


def stub_bus():
    """The i2c-N number of the i2c-stub adapter."""
    for d in sorted(os.listdir("/sys/bus/i2c/devices")):
        if d.startswith("i2c-"):
            try:
                with open(f"/sys/bus/i2c/devices/{d}/name") as f:
                    if "stub" in f.read().lower():
                        return int(d[4:])
            except OSError:
                pass
    raise RuntimeError("no i2c-stub adapter")


def write_regs(bus, chip, writes):
    for reg, value, kind in writes:
        if kind == "w":
            bus.write_word(chip.addr, reg, value)
        else:
            bus.write_byte(chip.addr, reg, value)


def preset(bus, chip):
    write_regs(bus, chip, [(r, v, "b") for r, v in chip.probe_regs])
    write_regs(bus, chip, chip.data_writes())


def bind(busno, chip):
    with open(f"/sys/bus/i2c/devices/i2c-{busno}/new_device", "w") as f:
        f.write(f"{chip.driver_name} 0x{chip.addr:02x}\n")


def unbind(busno, chip):
    with open(f"/sys/bus/i2c/devices/i2c-{busno}/delete_device", "w") as f:
        f.write(f"0x{chip.addr:02x}\n")
